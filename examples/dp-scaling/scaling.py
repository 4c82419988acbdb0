"""Megatron-LM 2020 weak scaling, simulated: the eight runs of this folder against the published figures.

Runs every request here through the same path as `clustersim simulate` (load and validate the file, convert it
to a scenario, simulate) and prints one row per run: GPUs, iteration time, model and hardware TFLOP/s per GPU,
and weak-scaling efficiency = hardware TFLOP/s per GPU over that of the 1-GPU 1B run, beside the published
numbers (Megatron-LM images/tables.tex @5281919420, copied in /work/shared/reference/README.md section 1b).
Then the two factors apart, as the 2020 table gives both: TP efficiency (one replica of a model over the 1-GPU
run) and DP efficiency (128 replicas over one replica of the same model). Every one of these eight runs is a
calibration row (megatron20-dgxa100-*): the cost model was fitted on them, so agreement here is not a test of
prediction; `clustersim validate` judges the rows it was not fitted on. Last, the DP efficiency each DP run would
have with its gradient all-reduce overlapped with backward (`overlap_grad_reduce: true`, what Megatron-LM's
`--DDP-impl torch` does) beside the shipped after-backward reduction (its `local` DDP), so the README can say what
neither choice gives. With --write the printed tables go into README.md (--check: exit 1 if README.md does not
carry the current ones).

Usage, from the repository root:  .venv/bin/python examples/dp-scaling/scaling.py [--write | --check]
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import between_markers, write_or_check_between
from service.convert import to_scenario
from simcore.simulate import simulate

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
BEGIN, END = "<!-- figures: written by scaling.py -->", "<!-- end of figures -->"

# file stem -> (published iteration ms, published TFLOP/s per GPU, published weak-scaling efficiency or None)
PUBLISHED: dict[str, tuple[float, float, float | None]] = {
    "1b-1gpu": (1076, 149.8, None),
    "1b-128gpu": (1153, 139.8, 0.933),
    "2b-2gpu": (1026, 136.8, None),
    "2b-256gpu": (1101, 127.5, 0.855),
    "4b-4gpu": (1162, 124.7, None),
    "4b-512gpu": (1242, 116.7, 0.790),
    "8b-8gpu": (1343, 109.3, None),
    "8b-1024gpu": (1380, 106.5, 0.727),
}
BASELINE = "1b-1gpu"
# DP 128 run -> its one-replica run (same model, same TP)
REPLICA_OF = {"1b-128gpu": "1b-1gpu", "2b-256gpu": "2b-2gpu", "4b-512gpu": "4b-4gpu", "8b-1024gpu": "8b-8gpu"}


def factors(rows: list[dict[str, float | str | None]]) -> list[dict[str, float | str]]:
    """Per model: TP efficiency and DP efficiency, simulated and published (fractions)."""
    by_run = {str(r["run"]): float(r["hardware_tflops"]) for r in rows}  # type: ignore[arg-type]
    out: list[dict[str, float | str]] = []
    for dp_run, replica in REPLICA_OF.items():
        out.append({
            "model": replica.split("-")[0],
            "tp_eff": by_run[replica] / by_run[BASELINE],
            "tp_eff_pub": PUBLISHED[replica][1] / PUBLISHED[BASELINE][1],
            "dp_eff": by_run[dp_run] / by_run[replica],
            "dp_eff_pub": PUBLISHED[dp_run][1] / PUBLISHED[replica][1],
        })
    return out


def run_all() -> list[dict[str, float | str | None]]:
    rows: list[dict[str, float | str | None]] = []
    for stem in PUBLISHED:
        scenario = to_scenario(load_request_file(str(HERE / f"{stem}.yaml")))
        metrics = simulate(scenario).metrics
        rows.append({
            "run": stem,
            "gpus": scenario.cluster.num_gpus,
            "iteration_s": metrics.iteration_time_s,
            "model_tflops": metrics.model_tflops_per_gpu,
            "hardware_tflops": metrics.hardware_tflops_per_gpu,
        })
    base = next(r for r in rows if r["run"] == BASELINE)["hardware_tflops"]
    for row in rows:
        row["efficiency"] = float(row["hardware_tflops"]) / float(base)  # type: ignore[arg-type]
    return rows


def overlapped_dp_efficiency() -> dict[str, float]:
    """Per model: DP efficiency with the DP run's gradient all-reduce overlapped with backward."""
    out: dict[str, float] = {}
    for dp_run, replica in REPLICA_OF.items():
        one = simulate(to_scenario(load_request_file(str(HERE / f"{replica}.yaml")))).metrics
        scenario = to_scenario(load_request_file(str(HERE / f"{dp_run}.yaml")))
        many = simulate(replace(scenario, layout=replace(scenario.layout, overlap_grad_reduce=True))).metrics
        out[replica.split("-")[0]] = many.hardware_tflops_per_gpu / one.hardware_tflops_per_gpu
    return out


def render(rows: list[dict[str, float | str | None]], overlapped: dict[str, float]) -> str:
    """The three tables: every run, TP and DP efficiency apart, and DP efficiency after backward or overlapped."""
    header = (f"{'run':<11} {'GPUs':>5} {'iter s':>7} {'pub s':>6} {'model TF':>9} {'hw TF':>7} "
              f"{'pub TF':>7} {'eff':>6} {'pub eff':>7}")
    lines = [header, "-" * len(header)]
    for row in rows:
        pub_ms, pub_tf, pub_eff = PUBLISHED[str(row["run"])]
        pub_eff_text = f"{pub_eff:.1%}" if pub_eff is not None else "-"
        lines.append(f"{row['run']:<11} {row['gpus']:>5} {row['iteration_s']:>7.3f} {pub_ms / 1000:>6.3f} "
                     f"{row['model_tflops']:>9.1f} {row['hardware_tflops']:>7.1f} {pub_tf:>7.1f} "
                     f"{row['efficiency']:>6.1%} {pub_eff_text:>7}")
    lines.append(f"\n{'model':<6} {'TP eff':>7} {'pub':>7} {'diff':>6} {'DP eff':>7} {'pub':>7} {'diff':>6}")
    found = factors(rows)
    for f in found:
        tp, tp_pub, dp, dp_pub = (float(f[k]) for k in ("tp_eff", "tp_eff_pub", "dp_eff", "dp_eff_pub"))
        lines.append(f"{f['model']:<6} {tp:>7.1%} {tp_pub:>7.1%} {100 * (tp - tp_pub):>+6.1f} "
                     f"{dp:>7.1%} {dp_pub:>7.1%} {100 * (dp - dp_pub):>+6.1f}")
    lines.append(f"\n{'model':<6} {'pub DP':>7} {'after':>7} {'diff':>6} {'overlap':>7} {'diff':>6}")
    for f in found:
        dp, dp_pub, over = float(f["dp_eff"]), float(f["dp_eff_pub"]), overlapped[str(f["model"])]
        lines.append(f"{f['model']:<6} {dp_pub:>7.1%} {dp:>7.1%} {100 * (dp - dp_pub):>+6.1f} "
                     f"{over:>7.1%} {100 * (over - dp_pub):>+6.1f}")
    return "\n".join(lines)


def fenced(block: str) -> str:
    """The tables as the README shows them: a code block."""
    return f"```\n{block}\n```"


def with_figures(text: str, block: str) -> str:
    """README.md's text with `block` (as a code block) between the markers."""
    return between_markers(text, fenced(block), BEGIN, END)


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    block = render(run_all(), overlapped_dp_efficiency())
    print(block)
    elapsed = time.perf_counter() - started
    print(f"\nefficiency = hardware TFLOP/s per GPU / that of {BASELINE}; TP eff = one replica / {BASELINE}; "
          f"DP eff = 128 replicas / one replica of the same model (after: the all-reduce after backward, as "
          f"shipped; overlap: overlapped with backward); published TFLOP/s count recomputation (hardware FLOPs). "
          f"All eight runs are calibration rows. Simulated in {elapsed:.1f} s.")
    return write_or_check_between(README, fenced(block), BEGIN, END, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
