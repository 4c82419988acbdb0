"""NCCL's choice (collective_algorithm: auto) against collectives.json: every point of the measured all-reduce curve
of 8 H100s in a DGX H100 (time and error per size, the algorithm and protocol chosen, and NCCL's own flat estimate
beside it), then the acceptance figures: an 8-byte all-reduce over 1,024 A100s, 1 GiB in a DGX A100, across two,
and in a DGX H100.

Run:  python bench/nccl_curve.py          print the table
      python bench/nccl_curve.py --fit    also fit NVLS's launch and per-iteration synchronisation
                                          (simcore/cost/comm/nccl_kernels.py) to the NVLS points of the curve: the
                                          time is linear in both, so least squares of the relative error is
                                          solved exactly
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simcore.cost.comm.collectives import Collective, CollectiveModel, bus_bandwidth
from simcore.cost.comm.nccl_kernels import nvls_latency_s
from simcore.cost.comm.nccl_tuning import NcclAlgorithm
from simcore.domain.layout import CollectiveAlgorithm
from topology import NODE_PRESETS, Router, build_cluster, sized

REFERENCE = Path(__file__).resolve().parent.parent / "simcore" / "calibration" / "reference" / "collectives.json"
CURVE = "nccl-h100-8gpu-intranode-allreduce-curve"
AR = Collective.ALL_REDUCE


def measured(row_id: str) -> dict[str, Any]:
    rows = {row["id"]: row for row in json.loads(REFERENCE.read_text())}
    found: dict[str, Any] = rows[row_id]["measured"]
    return found


def auto(preset: str, gpus: int) -> CollectiveModel:
    cluster = build_cluster(sized(NODE_PRESETS[preset], gpus))
    return CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO)


def curve_rows() -> list[tuple[int, float, float, str, float]]:
    """(bytes, measured us, simulated us, choice, NCCL's estimate us) for every point of the H100 curve."""
    model, group = auto("dgx-h100", 8), [list(range(8))]
    rows = []
    for point in measured(CURVE)["curve"]:
        size = point["bytes"]
        choice = model.choice(AR, group, size)
        assert choice is not None
        rows.append((size, point["time_us"], model.isolated_time(AR, group, size) * 1e6, choice.label,
                     choice.time_s * 1e6))
    return rows


def fit() -> tuple[float, float]:
    """NVLS launch and synchronisation (seconds) minimising the squared relative error on the curve's NVLS points."""
    model, group = auto("dgx-h100", 8), [list(range(8))]
    comm = model.communicator(group[0])
    sums = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]  # normal equations of (launch, sync)
    for point in measured(CURVE)["curve"]:
        size, seen = point["bytes"], point["time_us"] * 1e-6
        choice = model.choice(AR, group, size)
        if choice is None or choice.algorithm is not NcclAlgorithm.NVLS:
            continue
        rate = model.phases(AR, group, size)[0].isolated_rate(model.capacity)
        base = nvls_latency_s(AR, choice.algorithm, comm, size, rate, 0.0, 0.0) + size / rate
        iterations = nvls_latency_s(AR, choice.algorithm, comm, size, rate, 0.0, 1.0) + size / rate - base
        x, y = (1.0 / seen, iterations / seen), 1.0 - base / seen
        for i in range(2):
            sums[i][0] += x[i] * x[0]
            sums[i][1] += x[i] * x[1]
            sums[i][2] += x[i] * y
    (a, b, e), (c, d, f) = sums
    det = a * d - b * c
    return (e * d - b * f) / det, (a * f - c * e) / det


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args()
    print(f"{CURVE} (collectives.json), all-reduce on 8 H100s:")
    print(f"{'bytes':>12} {'measured_us':>11} {'simulated_us':>12} {'error':>8}  {'choice':<12} "
          f"{'nccl_estimate_us':>16}")
    for size, seen, simulated, label, estimate in curve_rows():
        print(f"{size:>12} {seen:>11.1f} {simulated:>12.1f} {100 * (simulated / seen - 1):>+7.1f}%  {label:<12} "
              f"{estimate:>16.1f}")
    print()
    print(f"{'cluster':<10} {'GPUs':>5} {'bytes':>11} {'choice':<17} {'time_us':>10} {'busbw_GB/s':>10}")
    for preset, gpus, size in (("dgx-a100", 1024, 8), ("dgx-a100", 8, 2**30), ("dgx-a100", 16, 2**30),
                               ("dgx-h100", 8, 2**30)):
        model, group = auto(preset, gpus), [list(range(gpus))]
        choice = model.choice(AR, group, size)
        t = model.isolated_time(AR, group, size)
        label = "-" if choice is None else choice.label
        print(f"{preset:<10} {gpus:>5} {size:>11} {label:<17} {t * 1e6:>10.1f} "
              f"{bus_bandwidth(AR, gpus, size, t) / 1e9:>10.1f}")
    if args.fit:
        launch, sync = fit()
        print(f"\nNVLS fit: launch {launch * 1e6:.2f} us, synchronisation per iteration {sync * 1e6:.2f} us")


if __name__ == "__main__":
    main()
