"""Cost to train: GPT-100B and T5-100B, each trained on 20 tokens per parameter on 1,024 A100s (128 DGX A100
nodes), each with the fastest layout clustersim's search finds for it.

`--search` runs the two searches (service.search.run_search, the path of `clustersim search`) and writes each
winner, with the run's `training` section, as a request file of this folder. Without it, the script simulates
those two request files (the path of `clustersim simulate`) and writes README.md from the results: days,
GPU-hours, cost and energy of each run, their ratio, and what the ratio means under the Chinchilla scaling law.

Usage, from the repository root:  python examples/cost-to-train/plan.py --search   (search, then write everything)
                                  python examples/cost-to-train/plan.py            (writes README.md)
                                  python examples/cost-to-train/plan.py --check    (exit 1 if README.md is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

if __spec__ is None:  # run by its path: the repository root first, to import bench/ (README tooling) as a package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api_schemas import load_request_file
from bench.generated import write_or_check
from service.convert import to_scenario
from service.search import run_search
from simcore import Outcome, simulate

HERE = Path(__file__).resolve().parent
MODELS = ("gpt-100b", "t5-100b")
CLUSTER = {"preset": "dgx-a100", "num_nodes": 128}
GLOBAL_BATCH = 1536
MAX_CANDIDATES = 120
# Inputs of the run, not findings: Chinchilla's tokens per parameter, an assumed price and the catalog's TDP.
TRAINING = {"tokens_per_parameter": 20, "gpu_hour_usd": 2.0}
# Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models"), eq. 10, the fit of their Approach 3:
# L(N, D) = E + A / N^alpha + B / D^beta, N parameters, D training tokens.
E, A, B, ALPHA, BETA = 1.69, 406.4, 410.7, 0.34, 0.28


def request_path(model: str) -> Path:
    return HERE / f"{model}.yaml"


def search_layouts() -> None:
    """Search each model's fastest layout and write it, with the run, as a request file."""
    for model in MODELS:
        result = run_search({"model": {"preset": model}, "cluster": CLUSTER, "global_batch_size": GLOBAL_BATCH,
                             "bounds": {"max_candidates": MAX_CANDIDATES, "top_k": 1}})
        best = result["best"]
        document = {"model": {"preset": model}, "cluster": CLUSTER, "layout": best["layout"], "training": TRAINING}
        header = (f"# Written by plan.py --search: the fastest of {result['search']['simulated']} layouts simulated "
                  f"({result['search']['feasible']} fit).\n")
        request_path(model).write_text(header + yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def chinchilla_loss(parameters: float, tokens: float) -> float:
    return E + A / parameters ** ALPHA + B / tokens ** BETA


def _flops_per_token(outcome: Outcome) -> float:
    m = outcome.metrics
    return m.model_flops_per_iteration / (m.tokens_per_s * m.iteration_time_s)


def _row(model: str, outcome: Outcome) -> str:
    m, run = outcome.metrics, outcome.training
    assert run is not None
    t = run.without_failures
    return (f"| {model} | {m.tokens_per_s:,.0f} | {m.mfu:.1%} | {_flops_per_token(outcome) / 1e9:.0f} | "
            f"{run.tokens / 1e12:.2f}T | {t.days:.1f} | {t.gpu_hours / 1e6:.2f}M | ${(t.cost_usd or 0) / 1e6:.2f}M | "
            f"{t.energy_mwh:,.0f} |")


def render() -> str:
    outcomes: dict[str, Outcome] = {}
    layouts: dict[str, Any] = {}
    parameters: dict[str, int] = {}
    for model in MODELS:
        scenario = to_scenario(load_request_file(str(request_path(model))))
        outcomes[model] = simulate(scenario)
        layouts[model] = scenario.layout
        parameters[model] = scenario.model.total_parameters()
    gpt, t5 = (outcomes[m].training for m in MODELS)
    assert gpt is not None and t5 is not None
    ratio = t5.without_failures.gpu_hours / gpt.without_failures.gpu_hours
    per_token = (t5.without_failures.gpu_hours / t5.tokens) / (gpt.without_failures.gpu_hours / gpt.tokens)
    flops_ratio = _flops_per_token(outcomes["t5-100b"]) / _flops_per_token(outcomes["gpt-100b"])
    per_flop = per_token / flops_ratio
    n, d = parameters["gpt-100b"], gpt.tokens
    loss = chinchilla_loss(n, d)
    even = chinchilla_loss(n, d * ratio)
    lines = [
        "# Cost to train: GPT-100B against T5-100B",
        "",
        "Written by `python examples/cost-to-train/plan.py` from the simulation of",
        "[gpt-100b.yaml](gpt-100b.yaml) and [t5-100b.yaml](t5-100b.yaml); a test checks that it is current.",
        "Each file holds the fastest layout `clustersim search` found for its model on 1,024 A100s (128 DGX A100",
        f"nodes) at a global batch of {GLOBAL_BATCH} (`plan.py --search`, at most {MAX_CANDIDATES} candidates",
        f"simulated), and the run: {TRAINING['tokens_per_parameter']} tokens per parameter (Chinchilla's), "
        f"${TRAINING['gpu_hour_usd']:.2f} a GPU-hour",
        "(an assumption: scale the cost column by your price) and the catalog's 400 W TDP per A100. T5's tokens",
        "count both sides, encoder input and decoder target, as the result's `tokens_per_s` does.",
        "",
        "| model | tokens/s | MFU | model GFLOP per token | tokens | days | GPU-hours | cost | energy (MWh) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        _row("GPT-100B", outcomes["gpt-100b"]),
        _row("T5-100B", outcomes["t5-100b"]),
        "",
        "Layouts (from the search):",
        "",
    ]
    for model in MODELS:
        lay = layouts[model]
        lines.append(f"- {model}: DP {lay.dp} x TP {lay.tp} x PP {lay.pp}, microbatch {lay.microbatch_size}, "
                     f"{lay.schedule}{f' v{lay.virtual_stages}' if lay.virtual_stages > 1 else ''}, ZeRO "
                     f"{lay.zero_stage}, recompute {lay.recompute}")
    for model in MODELS:
        lines += [f"- warning ({model}): {w}" for w in outcomes[model].warnings]
    cheaper = "less" if per_token < 1 else "more"
    lines += [
        "",
        "## What the ratio means",
        "",
        f"The whole T5-100B run takes **{ratio:.2f}x** the GPU-hours (and the cost) of the GPT-100B run; per token,",
        f"**{per_token:.2f}x**. A T5 token costs {cheaper} because it passes through one stack only (an encoder",
        f"token through the encoder, a target token through the decoder): {flops_ratio:.2f}x a GPT token's model",
        f"FLOPs. Per model FLOP T5 costs **{per_flop:.2f}x** what GPT does: that is the architecture's efficiency on",
        "the cluster (the MFU ratio), the gap the project's argument is about.",
        "",
        f"For the money of the T5 run, GPT-100B could train on {ratio:.2f}x its tokens "
        f"({ratio * d / 1e12:.2f}T). Under",
        f"the Chinchilla law (Hoffmann et al. 2022, eq. 10: L = {E} + {A} / N^{ALPHA} + {B} / D^{BETA}), GPT-100B",
        f"({n / 1e9:.0f}B parameters) reaches a loss of {loss:.4f} on {d / 1e12:.2f}T tokens and {even:.4f} on",
        f"{ratio * d / 1e12:.2f}T. T5-100B pays for itself if it reaches {even:.4f} or lower on its "
        f"{t5.tokens / 1e12:.2f}T tokens:",
        (f"its loss may end up to {even - loss:.4f} above GPT-100B's {loss:.4f}"
         if even >= loss else f"{loss - even:.4f} below GPT-100B's {loss:.4f}")
        + f" ({100 * abs(even - loss) / (loss - E):.1f}% of the reducible loss). The law was fitted on",
        "decoder-only models, so this reads it for the GPT side alone: what GPT buys with the same money, not what",
        "T5 achieves.",
        "",
        "Why T5's efficiency is what it is: `examples/decoder-vs-encoder-decoder/` attributes the gap (T5's unequal",
        "stages and their bubble, the encoder output sent to every decoder stage, the data-parallel traffic of a",
        "model whose samples cost less compute per parameter).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if "--search" in argv:
        search_layouts()
    return write_or_check(HERE / "README.md", render(), argv, "python examples/cost-to-train/plan.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
