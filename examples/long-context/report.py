"""Long context: Llama-2-7B on 32 H100s, 1M tokens an iteration, at 8K to 1M tokens a sample. At each length the
layout search runs twice, without context parallelism (cp 1) and with it (cp generated), and this writes the
fastest layout of each (best/*.yaml), the searches' counts (best/searches.json), README.md and throughput.svg
from what the simulator measured. No figure in the README is typed in.

    python examples/long-context/report.py          # searches (minutes), writes best/, README.md, throughput.svg
    python examples/long-context/report.py --render # README.md and throughput.svg from best/ (no search)
    python examples/long-context/report.py --check  # re-simulates best/ and exits 1 if README.md is not current
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from api_schemas import SimulationRequest
from service import convert
from service.search import run_search
from simcore import GIB, MODEL_PRESETS, Layout, model_from_fields
from simcore.cost.memory import userbuffer_bytes
from simcore.simulate import simulate

HERE = Path(__file__).resolve().parent
BEST = HERE / "best"
LENGTHS = (8192, 32768, 131072, 524288, 1048576)
TOKENS_PER_ITERATION = 1 << 20
MODEL: dict[str, Any] = {"preset": "llama2-7b"}
CLUSTER: dict[str, Any] = {"preset": "dgx-h100", "num_nodes": 4}
# What both searches try (everything else generated: pp, dp, and cp where the space does not pin it): TP inside a
# node, the distributed optimizer, no or full recomputation (selective recomputes nothing more than none with
# flash attention), sequence parallelism with and without TP overlap, microbatch 1, 1F1B.
SPACE: dict[str, Any] = {"tp": [1, 2, 4, 8], "zero_stage": [1], "recompute": ["none", "full"],
                         "sequence_parallel": [True], "tp_comm_overlap": [False, True], "microbatch_size": [1],
                         "schedule": ["1f1b"], "placement": ["tp,dp,pp"]}
VARIANTS = {"no-cp": {"cp": [1]}, "cp": {}}


def label(length: int) -> str:
    return f"{length // 1024}k" if length < 1 << 20 else f"{length >> 20}m"


def search_request(length: int, variant: str) -> dict[str, Any]:
    return {"model": {**MODEL, "seq_length": length}, "cluster": CLUSTER,
            "global_batch_size": TOKENS_PER_ITERATION // length, "space": {**SPACE, **VARIANTS[variant]},
            "bounds": {"top_k": 1, "max_candidates": 400}}


def search_all() -> dict[str, Any]:
    """Both searches at every length; writes best/<length>-<variant>.yaml and returns the searches' counts."""
    BEST.mkdir(exist_ok=True)
    counts: dict[str, Any] = {}
    for length in LENGTHS:
        for variant in VARIANTS:
            request = search_request(length, variant)
            doc = run_search(request, workers=2)
            name = f"{label(length)}-{variant}"
            best = {"model": request["model"], "cluster": CLUSTER, "layout": doc["best"]["layout"]}
            (BEST / f"{name}.yaml").write_text(yaml.safe_dump(best, sort_keys=False))
            counts[name] = {k: doc["search"][k] for k in ("generated", "feasible", "simulated")}
            print(f"{name}: {doc['best']['summary']}: {doc['best']['tokens_per_s']:,.0f} tokens/s", flush=True)
    (BEST / "searches.json").write_text(json.dumps(counts, indent=1, sort_keys=True) + "\n")
    return counts


def results() -> dict[str, dict[str, Any]]:
    """Each shipped best layout simulated now (the result document), by name."""
    out = {}
    for length in LENGTHS:
        for variant in VARIANTS:
            name = f"{label(length)}-{variant}"
            doc = yaml.safe_load((BEST / f"{name}.yaml").read_text())
            out[name] = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))
            out[name]["request"] = doc
    return out


def describe(layout: dict[str, Any]) -> str:
    parts = [f"DP {layout['dp']} x TP {layout['tp']} x PP {layout['pp']}"
             + (f" x CP {layout['cp']}" if layout.get("cp", 1) > 1 else ""),
             f"recompute {layout['recompute']}"]
    if layout.get("tp_comm_overlap"):
        parts.append("TP overlap")
    return ", ".join(parts)


# Speed-ups closer to 1 than this are ties: the two layouts do the same work, and the simulator's small
# differences (a kernel's efficiency at another size) are not a reason to choose.
TIE = 0.01


def pays(rows: dict[str, dict[str, Any]], length: int) -> float:
    """Tokens/s of the best layout with CP over the best without, at one length."""
    return float(rows[f"{label(length)}-cp"]["tokens_per_s"] / rows[f"{label(length)}-no-cp"]["tokens_per_s"])


def cp_of(rows: dict[str, dict[str, Any]], length: int) -> int:
    return int(rows[f"{label(length)}-cp"]["request"]["layout"].get("cp", 1))


def userbuffers_gib(length: int) -> float:
    """TP overlap's userbuffers per GPU at `length` tokens a sample, microbatch 1, without CP (GiB)."""
    model = model_from_fields({**MODEL_PRESETS[MODEL["preset"]], "seq_length": length})
    layout = Layout(dp=1, tp=8, pp=1, microbatch_size=1, global_batch_size=1, sequence_parallel=True,
                    tp_comm_overlap=True)
    return userbuffer_bytes(model, layout) / GIB


def render(rows: dict[str, dict[str, Any]], counts: dict[str, Any]) -> str:
    lines = [
        "# Long context: where context parallelism pays",
        "",
        "Written by `examples/long-context/report.py` from the current code (`--check` re-simulates the layouts in",
        "`best/` and compares this file). Llama-2-7B (`llama2-7b`: 32 layers, h = 4096, 32 heads, no GQA, flash",
        "attention) on 32 H100s (4 DGX H100 nodes), 1,048,576 tokens an iteration at every length: 128 samples of",
        "8K tokens down to one sample of 1M. At each length the search (`clustersim search`, the space in",
        "`report.py`: TP 1-8 inside a node, ZeRO 1, no or full recomputation, sequence parallelism with and",
        "without TP overlap, microbatch 1, 1F1B, pp and dp generated) runs once with `cp: [1]` and once with cp",
        "generated (the divisors of GPUs / tp that keep seq_length / (2 cp) whole), and ranks by simulated",
        "tokens/s among the layouts that fit in memory.",
        "",
        "| tokens a sample | samples | fastest without CP | tokens/s | MFU | GiB | fastest with CP |"
        " tokens/s | MFU | GiB | exposed cp_comm s | CP over no CP |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for length in LENGTHS:
        plain, ring = rows[f"{label(length)}-no-cp"], rows[f"{label(length)}-cp"]
        lines.append(
            f"| {length:,} | {TOKENS_PER_ITERATION // length} | {describe(plain['request']['layout'])} | "
            f"{plain['tokens_per_s']:,.0f} | {plain['mfu']:.1%} | {plain['memory']['peak_gib_per_gpu']:.1f} | "
            f"{describe(ring['request']['layout'])} | {ring['tokens_per_s']:,.0f} | {ring['mfu']:.1%} | "
            f"{ring['memory']['peak_gib_per_gpu']:.1f} | {ring['time_breakdown_s'].get('cp_comm', 0.0):.3f} | "
            f"{pays(rows, length):.2f}x |")
    first = next((n for n in LENGTHS if cp_of(rows, n) > 1 and pays(rows, n) > 1 + TIE), None)
    ties = [n for n in LENGTHS if cp_of(rows, n) > 1 and abs(pays(rows, n) - 1) <= TIE]
    lines += ["", "Layouts searched (generated / fit and obey the rules / simulated):", ""]
    for length in LENGTHS:
        parts = []
        for variant in VARIANTS:
            c = counts[f"{label(length)}-{variant}"]
            parts.append(f"{variant} {c['generated']:,} / {c['feasible']:,} / {c['simulated']:,}")
        lines.append(f"- {length:,} tokens: " + "; ".join(parts))
    lines += [
        "",
        "## What the table says",
        "",
        f"- CP starts to pay at {first:,} tokens a sample" if first else "- CP never pays here",
        f"  (the first length where the fastest layout with CP beats the fastest without by more than {TIE:.0%})."
        + (f" At {', '.join(f'{n:,}' for n in ties)} tokens the fastest layout has CP but ties (within"
           f" {TIE:.0%}) the fastest without: CP and TP split the same work, both hide their communication"
           " (CP's K/V ring under attention, TP's collectives under the GEMMs with TP overlap), and both fit."
           if ties else ""),
    ]
    short = rows[f"{label(LENGTHS[0])}-cp"]
    lines += [
        f"- At {LENGTHS[0]:,} tokens there is no reason to split a sample: "
        f"{TOKENS_PER_ITERATION // LENGTHS[0]} samples give every GPU its own (the fastest layout with CP allowed"
        f" is {describe(short['request']['layout'])}).",
        "- From 128K tokens the activations of a sample no longer fit on a few GPUs without recomputing the",
        "  forward pass (full recomputation costs a third more compute), and without CP the ways to split a",
        "  sample are TP (on NVLink up to 8; TP overlap's userbuffers add 12 buffers of a sample's hidden states",
        f"  per GPU, {userbuffers_gib(131072):.0f} GiB at 128K tokens) and PP (with one or two samples per replica"
        " the pipeline never fills). CP splits the sequence itself: every rank keeps 1/cp of the activations,",
        "  and its ring of K/V sends hides under attention blocks that grow with the square of the length.",
        "- At 512K and 1M tokens there are two samples or one: without CP most of the 32 GPUs can only be used",
        "  by a long pipeline that one or two microbatches cannot fill, or by TP across nodes.",
        "",
        "![tokens/s against the tokens of a sample, best with and without CP](throughput.svg)",
        "",
    ]
    return "\n".join(lines)


def draw(rows: dict[str, dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "long-context"
    fig, ax = plt.subplots(figsize=(7, 3.6))
    x = range(len(LENGTHS))
    for offset, (variant, colour, name) in enumerate((("no-cp", "#B8B8B8", "without CP"),
                                                      ("cp", "#2F6DB5", "with CP"))):
        values = [rows[f"{label(n)}-{variant}"]["tokens_per_s"] / 1e3 for n in LENGTHS]
        ax.bar([i + (offset - 0.5) * 0.38 for i in x], values, width=0.38, color=colour, label=name)
    ax.set_xticks(list(x), [label(n) for n in LENGTHS])
    ax.set_xlabel("tokens a sample (1M tokens an iteration, 32 H100s)")
    ax.set_ylabel("thousand tokens/s")
    ax.legend(frameon=False)
    fig.tight_layout()
    fig.savefig(HERE / "throughput.svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs from a fresh run")
    parser.add_argument("--render", action="store_true", help="write README.md and the picture from best/ "
                        "without searching again")
    args = parser.parse_args(argv)
    counts = (json.loads((BEST / "searches.json").read_text()) if args.check or args.render else search_all())
    rows = results()
    text = render(rows, counts)
    if args.check:
        same = (HERE / "README.md").read_text() == text
        print("README.md is current" if same else "README.md differs from what the simulator measures now")
        return 0 if same else 1
    (HERE / "README.md").write_text(text)
    draw(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
