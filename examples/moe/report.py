"""Where expert parallelism lives: Qwen3-30B-A3B (128 experts of 768, top-8) on 64 GPUs with its experts folded
over data parallelism, EP 8 inside each DGX H100 node, EP 64 across the 8 nodes, and EP 64 on a GB200 NVL72 rack.

Simulates the request files of this folder (the path of `clustersim simulate`) and writes README.md from
the results: iteration time, the all-to-all exposed on the critical rank and its busy time, the bytes each rank
sends and how many of them leave the NVLink domain, the experts' GEMM efficiency at their per-expert token count,
and memory per GPU; then the same model in four pipeline stages under 1F1B and DualPipe, whose overlapped pairs
hide one microbatch's all-to-alls under another's kernels.

Usage, from the repository root:  python examples/moe/report.py          (writes README.md)
                                  python examples/moe/report.py --check  (exit 1 if README.md is stale)
"""

from __future__ import annotations

import sys
from pathlib import Path

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore import simulate
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.moe_kernels import transformer_layer_ops
from simcore.cost.moe import expert_load
from simcore.cost.parameters import FITTED
from simcore.simulate import Scenario
from topology.hardware import GIB

HERE = Path(__file__).resolve().parent
CASES = (("ep8-in-node", "EP 8 inside each node (64 H100)"), ("ep64-across-nodes", "EP 64 across 8 nodes (64 H100)"),
         ("ep64-nvl72", "EP 64 on an NVL72 rack (64 GB200)"))
PIPELINES = (("pp4-ep16-1f1b", "1F1B"), ("pp4-ep16-dualpipe", "DualPipe"))


def off_domain_share(scenario: Scenario) -> float:
    """The share of a rank's all-to-all bytes sent to ranks outside its NVLink domain (rank 0's EP group: the
    stage's ranks ep at a time, data-parallel ranks innermost as in these layouts)."""
    ep, domain = scenario.layout.ep, scenario.cluster.domain_gpus
    return sum(1 for peer in range(ep) if peer // domain != 0) / ep


def expert_gemm(scenario: Scenario) -> tuple[float, float, float]:
    """Per-expert rows, and the efficiency (of the 16-bit peak) of one expert's fc1 GEMM and of the layer's
    attention output projection, on the cost model's kernels."""
    model, layout = scenario.model, scenario.layout
    gpu = scenario.cluster.hardware
    layer = model.layer_stacks()[-1][0]
    ops = transformer_layer_ops(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, layer,
                                layout.fp8, layout.ep, layout.expert_tp)
    assert model.moe is not None
    load = expert_load(model, model.moe, layout.microbatch_size, layout.tp, layout.ep, layout.expert_tp)

    def efficiency(name: str) -> float:
        op = next(op for op in ops if op.name == name)
        return op.flops / op_time(op, gpu, FITTED) / gpu.peak_flops_per_s

    return load.per_expert, efficiency("expert_fc1"), efficiency("attention_output")


def render() -> str:
    lines = [
        "# Mixture of experts: where expert parallelism lives",
        "",
        "Written by `python examples/moe/report.py` from the simulation of the three request files of this folder;",
        "a test checks that it is current. Qwen3-30B-A3B (48 MoE layers, 128 experts of 768, top-8) on 64 GPUs,",
        "global batch 512 of 4,096 tokens, microbatch 2, data parallelism 64 with the distributed optimizer; the",
        "experts fold over the data-parallel ranks (Megatron-Core's parallel folding), so only ep changes between",
        "the H100 rows, and the GB200 row moves the same layout onto one NVLink domain.",
        "",
        "| layout | iteration s | tokens/s/GPU | MFU | ep_comm exposed s | EP busy s | EP GB sent per rank "
        "| share over NICs | per-expert rows | expert GEMM eff. | peak GiB/GPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    results = {}
    for name, label in CASES:
        scenario = to_scenario(load_request_file(str(HERE / f"{name}.yaml")))
        outcome = simulate(scenario)
        m = outcome.metrics
        rows, expert_eff, dense_eff = expert_gemm(scenario)
        results[name] = (m, rows, expert_eff, dense_eff, scenario)
        peak = max(stage.memory.total for stage in m.stages) / GIB
        lines.append(
            f"| {label} | {m.iteration_time_s:.2f} | {m.tokens_per_s / scenario.cluster.num_gpus:,.0f} | {m.mfu:.1%} | "
            f"{m.time_breakdown_s['ep_comm']:.2f} | {m.communication_s['ep']:.2f} | "
            f"{m.communication_bytes['ep'] / 1e9:,.0f} | {off_domain_share(scenario):.0%} | {rows:,.0f} | "
            f"{expert_eff:.0%} | {peak:.1f} |")
    inside, across, rack = (results[name][0] for name, _ in CASES)
    rows8, eff8, dense8 = results["ep8-in-node"][1:4]
    rows64, eff64 = results["ep64-across-nodes"][1:3]
    stage = inside.stages[0].memory
    stage64 = across.stages[0].memory
    lines += [
        "",
        "What the figures say:",
        "",
        "- **The all-to-all.** Each rank's all-to-all buffer is the same whatever ep is (8 routed copies of its",
        "  tokens' hidden states, dispatched and combined in every layer's forward and backward); it sends (ep-1)/ep",
        f"  of it ({inside.communication_bytes['ep'] / 1e9:,.0f} GB a step with EP 8, "
        f"{across.communication_bytes['ep'] / 1e9:,.0f} GB with EP 64). Inside a node it rides NVLink and the step "
        "waits",
        f"  {inside.time_breakdown_s['ep_comm']:.2f} s for them; across nodes "
        f"{off_domain_share(results['ep64-across-nodes'][4]):.0%} of them leave through each GPU's one NIC (NCCL's",
        "  all-to-all runs at about one NIC's rate across nodes: collectives.json) and the step waits "
        f"{across.time_breakdown_s['ep_comm']:.2f} s,",
        f"  {across.time_breakdown_s['ep_comm'] / inside.time_breakdown_s['ep_comm']:.1f}x as long. On the NVL72 rack "
        f"EP 64 sends nothing over the NICs and waits {rack.time_breakdown_s['ep_comm']:.2f} s.",
        f"- **Expert GEMMs.** With EP 8 each rank holds 16 experts of {rows8:,.0f} token copies each; their fc1, one "
        f"grouped GEMM (TE GroupedLinear), runs at {eff8:.0%} of",
        f"  the 16-bit peak against {dense8:.0%} for the attention output projection on the same tokens. EP 64 leaves "
        f"2 experts a rank with {rows64:,.0f} rows each ({eff64:.0%}): a grouped GEMM ramps up once whatever the "
        "split.",
        f"- **Memory.** EP 8: {stage.weights / GIB:.1f} GiB of weights, {stage.gradients / GIB:.1f} of gradients and "
        f"{stage.optimizer_states / GIB:.1f} of optimizer states a GPU (the experts' sharded over the 8 expert",
        f"  data-parallel ranks, the dense layers' over 64). EP 64 holds 2 experts a layer instead of 16: "
        f"{stage64.weights / GIB:.1f} GiB of weights and",
        f"  {stage64.gradients / GIB:.1f} of gradients; its optimizer states stay {stage64.optimizer_states / GIB:.1f}"
        " GiB, since with the distributed optimizer each",
        "  expert's states are split over ep x expert data parallelism = 64 GPUs either way.",
        f"  Activations ({stage.activations / GIB:.1f} GiB) do not depend on ep: every rank computes the same number "
        "of routed copies.",
        "",
        *pipelines(),
    ]
    return "\n".join(lines)


def pipelines() -> list[str]:
    """The DualPipe section: the same model in 4 pipeline stages, 1F1B against DualPipe."""
    lines = [
        "## DualPipe: one microbatch's all-to-alls under another's kernels",
        "",
        "The same model, batch and 64 H100 in 4 pipeline stages (`pp4-ep16-*.yaml`): dp 16, EP 16 over the two",
        "nodes of each stage's data-parallel ranks, microbatch 2, so 16 microbatches a pipeline. DualPipe",
        "(DeepSeek-V3 report, section 3.2.1) feeds microbatches from both ends and runs a forward chunk and a backward",
        "chunk as one overlapped pair: each MoE layer's attention side, dispatch, expert side and combine alternate",
        "between a compute and a communication stream, so the pair's all-to-alls run beside the other half's kernels",
        "(simcore/engine/pair_overlap.py).",
        "",
        "| schedule | iteration s | bubble | ep_comm exposed s | EP busy s | expert weights GiB/GPU | peak GiB/GPU |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    metrics = {}
    for name, label in PIPELINES:
        m = metrics[name] = simulate(to_scenario(load_request_file(str(HERE / f"{name}.yaml")))).metrics
        peak = max(stage.memory.total for stage in m.stages) / GIB
        experts = max(stage.memory.expert_weights for stage in m.stages) / GIB
        lines.append(f"| {label} | {m.iteration_time_s:.2f} | {m.bubble_fraction:.1%} | "
                     f"{m.time_breakdown_s['ep_comm']:.2f} | {m.communication_s['ep']:.2f} | {experts:.2f} | "
                     f"{peak:.1f} |")
    one, dual = (metrics[name] for name, _ in PIPELINES)
    hidden = 1 - dual.time_breakdown_s["ep_comm"] / one.time_breakdown_s["ep_comm"]
    lines += [
        "",
        f"- **The all-to-all.** Both schedules run the same all-to-alls ({one.communication_s['ep']:.2f} s of them "
        "over the 4 ranks); 1F1B waits for all of",
        f"  them on the compute stream ({one.time_breakdown_s['ep_comm']:.2f} s a rank), DualPipe for "
        f"{dual.time_breakdown_s['ep_comm']:.2f} s: {hidden:.0%} less, what its overlapped pairs hide (its warm-up",
        "  and cool-down passes, which run alone, still wait for theirs, and an all-to-all longer than the",
        "  kernels beside it shows its excess).",
        f"- **The step.** {one.iteration_time_s:.2f} s under 1F1B, {dual.iteration_time_s:.2f} s under DualPipe "
        f"({one.iteration_time_s / dual.iteration_time_s:.2f}x), its bubble {one.bubble_fraction:.1%} against "
        f"{dual.bubble_fraction:.1%}.",
        "- **Memory.** DualPipe holds two stages of the model per rank (one of each direction's copy): twice the",
        "  weights, experts included, and their gradients and optimizer states.",
        "",
    ]
    return lines


def main() -> int:
    text = render()
    readme = HERE / "README.md"
    if "--check" in sys.argv[1:]:
        return 0 if readme.exists() and readme.read_text(encoding="utf-8") == text else 1
    readme.write_text(text, encoding="utf-8")
    print(f"wrote {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
