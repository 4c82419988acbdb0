"""Simulate the zero-scaling requests: TFLOP/s per GPU at 384 and 1536 GPUs for ZeRO 3 as each framework runs it
(`layout.zero_implementation`) beside TP 8 x PP 8, the 1536/384 ratios and the ordering at 1536 GPUs; print them,
and with --write put them into README.md (--check: exit 1 if README.md does not carry the current figures).

Run:  python examples/zero-scaling/compare.py [--write | --check]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import between_markers, write_or_check_between
from service.convert import to_scenario
from simcore.simulate import simulate

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
BEGIN, END = "<!-- figures: written by compare.py -->", "<!-- end of figures -->"
LAYOUTS = {  # request file prefix -> what it is
    "zero3": "ZeRO 3, megatron: one all-gather per layer",
    "zero3-50m-gathers": "ZeRO 3, megatron, 50M-element gathers",
    "fsdp": "ZeRO 3, fsdp",
    "deepspeed": "ZeRO 3, deepspeed (since 2022)",
    "deepspeed-2021": "ZeRO 3, deepspeed_2021 (v0.4)",
    "zeropp": "ZeRO 3, deepspeed with ZeRO++ (qwZ, hpZ 8, qgZ)",
    "tp8-pp8": "TP 8 x PP 8, ZeRO 1",
}
SIZES = (384, 1536)


def figures() -> dict[str, dict[int, tuple[float, float, bool, float, float]]]:
    """Per layout and GPU count: iteration s, model TFLOP/s per GPU, fits, peak GiB, exposed dp+zero s."""
    out: dict[str, dict[int, tuple[float, float, bool, float, float]]] = {}
    for name in LAYOUTS:
        for gpus in SIZES:
            m = simulate(to_scenario(load_request_file(str(HERE / f"{name}-{gpus}.yaml")))).metrics
            out.setdefault(name, {})[gpus] = (m.iteration_time_s, m.model_tflops_per_gpu, m.fits,
                                              m.peak_stage.memory.total / 2**30, m.time_breakdown_s["dp_comm"])
    return out


def ratio(results: dict[str, dict[int, tuple[float, float, bool, float, float]]], name: str) -> float:
    return results[name][1536][1] / results[name][384][1]


def render(results: dict[str, dict[int, tuple[float, float, bool, float, float]]]) -> str:
    lines = ["| request | layout | GPUs | iteration s | TFLOP/s per GPU | fits | GiB | exposed dp+zero s |",
             "|---|---|---|---|---|---|---|---|"]
    for name, label in LAYOUTS.items():
        for gpus in SIZES:
            time_s, tflops, fits, gib, exposed = results[name][gpus]
            lines.append(f"| `{name}-{gpus}` | {label} | {gpus} | {time_s:.2f} | {tflops:.1f} | {fits} | "
                         f"{gib:.1f} | {exposed:.2f} |")
    lines += ["", "TFLOP/s per GPU at 1536 GPUs over 384 GPUs (Narayanan et al. 2021 measured 0.31 for DeepSpeed's "
              "ZeRO 3 and 0.92 for PTD-P):", ""]
    lines += [f"- `{name}`: {ratio(results, name):.2f}" for name in LAYOUTS]
    at_1536 = sorted(LAYOUTS, key=lambda n: -results[n][1536][1])
    lines += ["", "At 1536 GPUs, fastest first: " + ", ".join(
        f"`{n}` ({results[n][1536][1]:.1f})" for n in at_1536) + "."]
    return "\n".join(lines)


def with_figures(text: str, block: str) -> str:
    return between_markers(text, block, BEGIN, END)


def main(argv: list[str]) -> int:
    block = render(figures())
    print(block)
    return write_or_check_between(README, block, BEGIN, END, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
