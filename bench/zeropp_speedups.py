"""ZeRO++ over ZeRO-3 on the DeepSpeed ZeRO++ blog's bars (reference sharded-dp.json, group zeropp-blog): for each
network and tokens per GPU, the published speedup (ZeRO-3's step time over ZeRO++'s, from their TFLOP/s) and the
simulated one, over the models the blog shows there, with each ZeRO++ row's error.

Run:  python bench/zeropp_speedups.py
"""

from __future__ import annotations

import sys
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simcore.calibration import sharded_rows
from simcore.calibration.validate import load_reference
from simcore.simulate import simulate

SHIPPED = Path(sharded_rows.__file__).resolve().parent / "reference" / sharded_rows.REFERENCE
PREFIX = "zeropp-blog-"


def main() -> int:
    rows = {str(c["id"]): c for c in load_reference(str(SHIPPED)) if str(c["id"]).startswith(PREFIX)}
    times: dict[str, tuple[float, float]] = {}
    for case_id, case in rows.items():
        measured = sharded_rows.measured_time(case)
        if measured is not None:
            times[case_id] = (measured, simulate(sharded_rows.scenario_for(case)).metrics.iteration_time_s)
    groups: dict[tuple[str, str], list[tuple[str, float, float, float]]] = {}
    for case_id, (measured, simulated) in times.items():
        if not case_id.startswith(PREFIX + "zeropp-"):
            continue
        size, tokens, network = case_id.removeprefix(PREFIX + "zeropp-").split("-")[:3]
        base = times.get(case_id.replace(PREFIX + "zeropp-", PREFIX + "zero3-"))
        if base is None:
            continue
        error = 100 * (simulated - measured) / measured
        groups.setdefault((network, tokens), []).append((size, base[0] / measured, base[1] / simulated, error))
    print("network  tokens  models                published      simulated      ZeRO++ rows' error %")
    for (network, tokens), found in sorted(groups.items()):
        published, simulated_x = [f[1] for f in found], [f[2] for f in found]
        errors = [f[3] for f in found]
        print(f"{network:8} {tokens:7} {','.join(f[0] for f in found):21} {min(published):.2f}-{max(published):.2f}x"
              f"     {min(simulated_x):.2f}-{max(simulated_x):.2f}x     {min(errors):+.0f} .. {max(errors):+.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
