"""GPT against T5 at about 100B parameters on 1024 A100s: simulate the grid in grid.json for both models, pick
each model's fastest layout (T5 once per pipeline partition), and write README.md and the best requests
(best/*.yaml) from what the simulator measured. No figure in the README is typed in.

    python examples/decoder-vs-encoder-decoder/report.py          # writes README.md and best/
    python examples/decoder-vs-encoder-decoder/report.py --check  # exit 1 if README.md is not what it would write
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from api_schemas import SimulationRequest
from service import convert as adapters
from service.compare import stage_imbalance
from simcore import MODEL_PRESETS
from simcore.simulate import simulate

HERE = Path(__file__).resolve().parent
GPUS_PER_NODE = 8


def run(doc: dict[str, Any]) -> dict[str, Any]:
    scenario = adapters.to_scenario(SimulationRequest.model_validate(doc))
    return adapters.to_response(simulate(scenario))


def layouts(grid: dict[str, Any], gpus: int, batch: int, partitions: list[str | None]) -> Iterator[dict[str, Any]]:
    for tp, pp in grid["tp_pp"]:
        zeros = grid["zero_stage_with_pipeline"] if pp > 1 else grid["zero_stage_without_pipeline"]
        for b in grid["microbatch_size"]:
            for recompute in grid["recompute"]:
                for zero in zeros:
                    for part in (partitions if pp > 1 else [None]):
                        layout = {"dp": gpus // (tp * pp), "tp": tp, "pp": pp, "microbatch_size": b,
                                  "global_batch_size": batch, "recompute": recompute, "zero_stage": zero,
                                  "sequence_parallel": grid["sequence_parallel"],
                                  "overlap_grad_reduce": grid["overlap_grad_reduce"]}
                        if part is not None:
                            layout["pipeline_partition"] = part
                        yield layout


def label(layout: dict[str, Any]) -> str:
    text = (f"DP {layout['dp']} x TP {layout['tp']} x PP {layout['pp']}, microbatch {layout['microbatch_size']}, "
            f"{layout['recompute']} recompute, ZeRO {layout['zero_stage']}")
    return text + (f", {layout['pipeline_partition']} split" if "pipeline_partition" in layout else "")


Run = tuple[dict[str, Any], dict[str, Any]]  # (request document, result)
CHOICES = (("gpt", "gpt", None), ("t5-even", "t5", "even"), ("t5-balanced", "t5", "balanced"))  # key, model, split
NAMES = {"gpt": "GPT-100B", "t5-even": "T5-100B, even split", "t5-balanced": "T5-100B, balanced split"}


class Variant:
    """One model pair at one sequence length: every grid point simulated; the fastest per model and split, over
    all layouts (`best`) and over the pipelined ones (`best_pp`)."""

    def __init__(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        self.key, self.title = spec["key"], spec["title"]
        gpus = config["cluster"]["num_nodes"] * GPUS_PER_NODE
        batch = config["global_batch_size"]
        self.runs: dict[str, list[Run]] = {"gpt": [], "t5": []}
        for name in ("gpt", "t5"):
            parts = config["grid"]["t5_partitions"] if name == "t5" else [None]
            for layout in layouts(config["grid"], gpus, batch, parts):
                doc = {"model": dict(spec[name]), "cluster": dict(config["cluster"]), "layout": layout}
                self.runs[name].append((doc, run(doc)))
        self.best = {key: self._fastest(model, part, False) for key, model, part in CHOICES}
        self.best_pp = {key: self._fastest(model, part, True) for key, model, part in CHOICES}

    def _fastest(self, name: str, partition: str | None, pipelined: bool) -> Run:
        """The fastest layout that fits (ties: by label); a T5 split also competes with the layouts that have no
        pipeline, unless `pipelined`."""
        pool = [(d, r) for d, r in self.runs[name] if r["memory"]["fits"]
                and d["layout"].get("pipeline_partition") in (partition, None)
                and (d["layout"]["pp"] > 1 or not pipelined)]
        return min(pool, key=lambda dr: (dr[1]["iteration_time_s"], label(dr[0]["layout"])))

    def same_layout(self, name: str, layout: dict[str, Any]) -> dict[str, Any] | None:
        """The model's result at the same layout, the pipeline split aside (GPT has one split)."""
        want = {k: v for k, v in layout.items() if k != "pipeline_partition"}
        for doc, result in self.runs[name]:
            if {k: v for k, v in doc["layout"].items() if k != "pipeline_partition"} == want:
                return result
        return None


def model_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The request's model fields with its preset's filled in."""
    return {**MODEL_PRESETS[doc["model"]["preset"]], **doc["model"]}


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ideal_bubble(layout: dict[str, Any]) -> float:
    p = layout["pp"]
    m = layout["global_batch_size"] // (layout["dp"] * layout["microbatch_size"])
    return (p - 1) / (m + p - 1)


def best_table(best: dict[str, Run]) -> list[str]:
    gpt, even, bal = (best[key][1] for key, _, _ in CHOICES)
    out = ["| model | layout | MFU | iteration s | bubble fraction | stage imbalance | peak GiB/GPU |",
           "|---|---|---|---|---|---|---|"]
    for key, _, _ in CHOICES:
        doc, r = best[key]
        out.append(f"| {NAMES[key]} | {label(doc['layout'])} | {pct(r['mfu'])} | {r['iteration_time_s']:.2f} | "
                   f"{r['bubble_fraction']:.3f} | {stage_imbalance(r['stages']):.3f} | "
                   f"{r['memory']['peak_gib_per_gpu']:.1f} |")
    return out + ["", f"- GPT's MFU over T5's with the even split: **{gpt['mfu'] / even['mfu']:.2f}x**; over T5's "
                  f"with the balanced split: **{gpt['mfu'] / bal['mfu']:.2f}x**; the balanced split over the even "
                  f"one: {bal['mfu'] / even['mfu']:.2f}x.", ""]


def breakdown_table(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    out = ["The critical rank's time, seconds per iteration (the result's exclusive `time_breakdown_s`):", "",
           "| | compute | recompute | tp wait | pp wait | dp wait | bubble | iteration |",
           "|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        t = r["time_breakdown_s"]
        out.append(f"| {name} | {t['compute']:.2f} | {t['recompute']:.2f} | {t['tp_comm']:.2f} | "
                   f"{t['pp_comm']:.3f} | {t['dp_comm']:.2f} | {t['bubble']:.2f} | {r['iteration_time_s']:.2f} |")
    return out + [""]


def work_per_sample(t5: Run, gpt: Run, gpt_same: dict[str, Any] | None) -> str:
    t5_flops = t5[1]["model_flops_per_iteration"] / t5[0]["layout"]["global_batch_size"]
    gpt_flops = gpt[1]["model_flops_per_iteration"] / gpt[0]["layout"]["global_batch_size"]
    ref_name, ref = ("GPT's at the same layout", gpt_same) if gpt_same is not None else ("GPT's", gpt[1])
    r = t5[1]
    return (f"- **Work per sample**: a T5 sample costs {t5_flops / gpt_flops:.2f}x the model FLOPs of a GPT sample "
            "(each token passes only the encoder's or the decoder's half of the layers) while the parameters to "
            "synchronise and update are about the same, so the gradient reduction has less compute to hide "
            "behind: T5's exposed data-parallel wait is "
            f"{pct(r['time_breakdown_s']['dp_comm'] / r['iteration_time_s'])} of its iteration, {ref_name} "
            f"{pct(ref['time_breakdown_s']['dp_comm'] / ref['iteration_time_s'])}.")


def render_variant(v: Variant) -> list[str]:
    out = [f"## {v.title}", "", "### Fastest layout of the grid", "",
           "Each model's fastest layout that fits in 80 GB (T5 once per split; a layout without a pipeline "
           "competes for both splits):", ""]
    out += best_table(v.best)
    gpt, even = v.best["gpt"], v.best["t5-even"]
    gpt_same = v.same_layout("gpt", even[0]["layout"])
    rows = [("GPT, its fastest layout", gpt[1])] + ([("GPT at T5-even's layout", gpt_same)] if gpt_same else [])
    out += breakdown_table(rows + [("T5 even, its fastest layout", even[1]),
                                   ("T5 balanced, its fastest layout", v.best["t5-balanced"][1])])
    out += [work_per_sample(even, gpt, gpt_same), ""]
    out += ["### With pipeline parallelism", "",
            "Each model's fastest pipelined layout (PP > 1) that fits: where the pipeline's own costs show.", ""]
    out += best_table(v.best_pp)
    out += where_t5_loses(v, v.best_pp["gpt"], v.best_pp["t5-even"], v.best_pp["t5-balanced"])
    out += ["### Memory", ""] + memory_lines(v)
    return out


def where_t5_loses(v: Variant, gpt: Run, even: Run, bal: Run) -> list[str]:
    gpt_same = v.same_layout("gpt", even[0]["layout"])
    rows = [("GPT, its fastest pipelined layout", gpt[1])] + (
        [("GPT at T5-even's layout", gpt_same)] if gpt_same is not None else [])
    out = breakdown_table(rows + [("T5 even", even[1]), ("T5 balanced", bal[1])])
    doc, r = even
    lay = doc["layout"]
    per_stage = ", ".join(f"{'+'.join(f'{n} {k}' for k, n in s['layers'].items() if k in ('encoder', 'decoder'))}"
                          f" {1e3 * (s['forward_s'] + s['backward_s']):.0f} ms ({pct(s['busy_fraction'])} busy)"
                          for s in r["stages"])
    out += [f"- **Stage imbalance** (even split, {label(lay)}): forward + backward per microbatch and busy "
            f"fraction per stage: {per_stage}. The busiest stage works {stage_imbalance(r['stages']):.2f}x the "
            f"mean; the balanced split's fastest layout has {stage_imbalance(bal[1]['stages']):.2f}x.",
            f"- **Bubble**: {pct(r['bubble_fraction'])} of the iteration (fill, drain and waits on other "
            f"stages), against {pct(ideal_bubble(lay))} for equal stages at this pp and microbatch count, "
            f"(p-1)/(m+p-1); the excess is time the faster stages wait on the slowest."]
    if gpt_same is not None:
        out += [f"  GPT at the same layout: bubble {pct(gpt_same['bubble_fraction'])}, stage imbalance "
                f"{stage_imbalance(gpt_same['stages']):.2f}x."]
        t5_model, gpt_model = model_fields(even[0]), model_fields(gpt[0])
        enc, dec, seq = t5_model["seq_length"], t5_model["decoder_seq_length"], gpt_model["seq_length"]
        out += [f"- **Pipeline traffic**: a message between two decoder stages carries the target's hidden "
                f"states and the encoder output ({dec} + {enc} tokens a sample), one between encoder stages "
                f"{enc} tokens, GPT's {seq}; the gradient of the encoder output flows back through every "
                f"decoder stage. Per iteration T5 sends {r['communication_bytes']['pp'] / 1e9:.2f} GB between "
                f"stages (one rank of each stage), GPT {gpt_same['communication_bytes']['pp'] / 1e9:.2f} GB at "
                f"the same layout; the compute stream waited {r['time_breakdown_s']['pp_comm']:.3f} s on it "
                f"(GPT {gpt_same['time_breakdown_s']['pp_comm']:.3f} s)."]
    out += [work_per_sample(even, gpt, gpt_same), ""]
    return out


def memory_lines(v: Variant) -> list[str]:
    out = []
    for name, title in (("gpt", "GPT"), ("t5", "T5")):
        over = [(d, r) for d, r in v.runs[name] if not r["memory"]["fits"]]
        worst = ", ".join(sorted({f"{label(d['layout'])} ({r['memory']['peak_gib_per_gpu']:.0f} GiB)"
                                  for d, r in over}))
        out.append(f"- {title}: {len(over)} of {len(v.runs[name])} grid layouts do not fit"
                   + (f": {worst}." if over else "."))
    out += ["", "T5 without pipeline parallelism (TP 8 x DP 128), the fastest layout of each ZeRO stage:", "",
            "| ZeRO | fits | peak GiB/GPU | MFU | iteration s |", "|---|---|---|---|---|"]
    for zero in sorted({d["layout"]["zero_stage"] for d, _ in v.runs["t5"] if d["layout"]["pp"] == 1}):
        pool = [(d, r) for d, r in v.runs["t5"] if d["layout"]["pp"] == 1 and d["layout"]["zero_stage"] == zero]
        fitting = [p for p in pool if p[1]["memory"]["fits"]]
        doc, r = min(fitting or pool, key=lambda dr: dr[1]["iteration_time_s"])
        out.append(f"| {zero} | {'yes' if r['memory']['fits'] else 'no'} | {r['memory']['peak_gib_per_gpu']:.1f} | "
                   f"{pct(r['mfu']) if r['memory']['fits'] else '-'} | "
                   f"{r['iteration_time_s']:.2f} |")
    return out + [""]


INTRO = """# GPT against T5 at 100B parameters on 1024 A100s

Written by `python examples/decoder-vs-encoder-decoder/report.py` from what the simulator measured; every figure
below comes from a simulation of the grid in `grid.json` (both models, the same global batch in samples, 128 DGX
A100 nodes). The fastest layout of each model, and of T5 with each pipeline split, is written to `best/`:
`clustersim compare examples/decoder-vs-encoder-decoder/best/long-*.yaml` shows them side by side.

Pipelining wants a regular, symmetric, linear network. GPT is one: equal layers, one tensor between stages. T5 is
not: its encoder and decoder layers differ in cost (a decoder layer adds cross-attention), so stages cut by layer
count are unequal; every decoder stage needs the encoder output, so the messages between decoder stages carry it
and its gradient flows back through every decoder stage to the last encoder stage; and a T5 sample does about
half the FLOPs of a GPT sample of the same size and length for as many parameters to synchronise.

- `even`: layers split by count, what Megatron does (the encoder on the first stages in proportion to its
  layers).
- `balanced`: layers and the encoder/decoder stage boundary chosen so the slowest stage (by simulated cost) is as
  fast as whole layers allow: what a better pipeline could do.

## Pictures

Drawn by `python examples/pictures.py` (with the `clustersim` Python API, from simulations of
`best/long-pp-gpt.yaml` and `best/long-pp-t5-even.yaml`: each model's fastest pipelined layout at 2048 tokens a
sample); `tests/service/test_example_pictures.py` checks they are current. Where the critical rank's time goes:

![GPT-100B against T5-100B, iteration time by category](compare-pp.png)

The pipeline timelines (one row per stage, time across; forward light, backward dark with its recomputation in
orange, hatched white the bubble; a cross-hatched break where the steady state was extrapolated, not simulated).
GPT's two stages are equal and stay busy; T5's decoder stages (4-7, with cross-attention over the encoder output)
take longer a microbatch than its encoder stages (0-3), so the encoder stages wait on them all through the steady
state, besides the fill and the drain:

![GPT-100B pipeline timeline](timeline-gpt-pp.png)

![T5-100B pipeline timeline, even split](timeline-t5-even-pp.png)
"""


def render(variants: list[Variant]) -> str:
    lines = [INTRO]
    for v in variants:
        lines += render_variant(v)
    return "\n".join(lines).rstrip() + "\n"


def write_best(variants: list[Variant]) -> None:
    folder = HERE / "best"
    folder.mkdir(exist_ok=True)
    for v in variants:
        for kind, chosen in (("", v.best), ("pp-", v.best_pp)):
            for name, (doc, _) in chosen.items():
                text = yaml.safe_dump(copy.deepcopy(doc), sort_keys=False)
                what = "pipelined layout" if kind else "layout"
                (folder / f"{v.key}-{kind}{name}.yaml").write_text(
                    f"# Written by report.py: the fastest fitting {what} of the grid.\n{text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs from a fresh run")
    args = parser.parse_args(argv)
    config = json.loads((HERE / "grid.json").read_text())
    variants = [Variant(spec, config) for spec in config["variants"]]
    text = render(variants)
    if args.check:
        same = (HERE / "README.md").read_text() == text
        print("README.md is current" if same else "README.md differs from what the simulator measures now")
        return 0 if same else 1
    (HERE / "README.md").write_text(text)
    write_best(variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
