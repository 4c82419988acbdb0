"""Simulate the six zero-scaling requests and print TFLOP/s per GPU at 384 and 1536 GPUs, and the ratios.

Run:  python examples/zero-scaling/compare.py
"""

from __future__ import annotations

from pathlib import Path

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.simulate import simulate

HERE = Path(__file__).resolve().parent


def run(name: str) -> tuple[float, float, bool, float, dict[str, float]]:
    m = simulate(to_scenario(load_request_file(str(HERE / f"{name}.yaml")))).metrics
    return m.model_tflops_per_gpu, m.iteration_time_s, m.fits, m.peak_stage.memory.total / 2**30, \
        m.time_breakdown_s


def main() -> None:
    print(f"{'request':22s} {'iter s':>7s} {'TFLOP/s/GPU':>12s} {'fits':>5s} {'GiB':>6s}  exposed dp+zero s")
    results = {}
    for layout in ("zero3", "zero3-50m-gathers", "tp8-pp8"):
        for gpus in (384, 1536):
            name = f"{layout}-{gpus}"
            tflops, time_s, fits, gib, breakdown = run(name)
            results[name] = tflops
            print(f"{name:22s} {time_s:7.2f} {tflops:12.1f} {str(fits):>5s} {gib:6.1f}  {breakdown['dp_comm']:.2f}")
    for layout in ("zero3", "zero3-50m-gathers", "tp8-pp8"):
        ratio = results[f"{layout}-1536"] / results[f"{layout}-384"]
        print(f"{layout}: TFLOP/s per GPU at 1536 GPUs / at 384 GPUs = {ratio:.2f}")


if __name__ == "__main__":
    main()
