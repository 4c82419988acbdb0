"""Fit FP8_GEMM_EFFICIENCY_RATIO (simcore/cost/compute/fp8.py) on the BF16/FP8 step-time ratios of the Nemotron-4-15B
pairs of dgxc-benchmarking v24.11.1 (the calibration rows of simcore/calibration/modern.py).

The fit matches speed-ups, not step times: a pair's ratio isolates what FP8 changes (the same layout, batch and
cluster), whatever error the 16-bit model has on that model. Prints the ratio that minimises the mean
|simulated - published| speed-up over the 8 pairs (a grid of 0.005 steps), and each pair at that value.

Run:  python bench/fit_fp8.py
"""

from __future__ import annotations

import simcore.cost.compute.fp8 as fp8
from simcore.calibration import modern
from simcore.calibration.validate import load_reference, measured_time
from simcore.simulate import simulate


def pairs() -> list[tuple[dict, dict]]:
    rows = {c["id"]: c for c in load_reference(None, modern.REFERENCE) if modern.is_calibration(c)}
    return [(rows[i], rows[i.replace("-bf16-", "-fp8-")]) for i in sorted(rows) if "-bf16-" in i]


def fit() -> tuple[float, float, list[tuple[str, float, float]]]:
    """The ratio on the grid that minimises the mean |speed-up error|, that error, and each pair's (FP8 row,
    published, simulated) speed-up at it. simcore.cost.compute.fp8's ratio is put back afterwards."""
    shipped = fp8.FP8_GEMM_EFFICIENCY_RATIO
    try:
        data = []
        for bf16, fp8_row in pairs():
            published = measured_time(bf16) / measured_time(fp8_row)  # type: ignore[operator]
            base_s = simulate(modern.scenario_for(bf16)).metrics.iteration_time_s
            data.append((fp8_row["id"], published, base_s, modern.scenario_for(fp8_row)))

        def speedups(ratio: float) -> list[float]:
            fp8.FP8_GEMM_EFFICIENCY_RATIO = ratio
            return [base_s / simulate(scenario).metrics.iteration_time_s for _, _, base_s, scenario in data]

        def loss(ratio: float) -> float:
            return sum(abs(s - d[1]) for s, d in zip(speedups(ratio), data)) / len(data)

        grid = [round(0.70 + 0.005 * i, 3) for i in range(61)]
        best = min(grid, key=loss)
        pairs_at = [(case, published, simulated) for (case, published, _, _), simulated in zip(data, speedups(best))]
        return best, loss(best), pairs_at
    finally:
        fp8.FP8_GEMM_EFFICIENCY_RATIO = shipped


def main() -> None:
    best, error, pairs_at = fit()
    print(f"FP8_GEMM_EFFICIENCY_RATIO = {best:.3f}: mean |speed-up error| {error:.4f}")
    for case, published, simulated in pairs_at:
        print(f"  {case:40s} published {published:.3f}  simulated {simulated:.3f}")


if __name__ == "__main__":
    main()
