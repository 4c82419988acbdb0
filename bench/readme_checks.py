"""Write the figures of README.md's "Other checks" list (the 1T example, collectives, the bubble's closed forms,
TP across nodes) from the current code, between its markers; tests/test_readme_checks.py fails when README.md
does not carry what this renders.

Run:  python bench/readme_checks.py [--check]      (--check: write nothing; exit 1 if README.md is stale)
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from api_schemas import load_request_file
from service.convert import to_response, to_scenario
from simcore import Layout, Scenario, model_from_fields, simulate
from simcore.cost.collectives import Collective, CollectiveModel, bus_bandwidth
from simcore.domain.layout import CollectiveAlgorithm, Schedule
from topology import NODE_PRESETS, Router, build_cluster, sized

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN = "<!-- other-checks: written by python bench/readme_checks.py; do not edit by hand -->"
END = "<!-- end of other checks -->"
PUBLISHED_1T_TFLOPS = 163.0  # Narayanan et al. (SC'21) Table 1, counting recomputation (the example's header)
DGX_A100 = NODE_PRESETS["dgx-a100"]
GIB = 2**30
# Equal stages for the closed forms: 16 layers of h = 4096 on 8 stages, a vocabulary of 8 (the embedding and the
# logits add almost nothing), free communication (tests/simcore/engine/test_engine.py's bubble model).
P = 8
BUBBLE_MODEL = {"architecture": "decoder_only", "num_layers": 16, "hidden_size": 4096, "num_attention_heads": 32,
                "vocab_size": 8, "seq_length": 2048}
MICROBATCHES = (8, 16, 32, 64)


def one_t() -> str:
    body = to_response(simulate(to_scenario(load_request_file(str(ROOT / "examples" / "gpt-1t-3072-a100.yaml")))))
    hw, t = float(body["hardware_tflops_per_gpu"]), float(body["iteration_time_s"])
    published_s = t * hw / PUBLISHED_1T_TFLOPS  # the same hardware FLOPs at the published rate
    b: dict[str, float] = body["time_breakdown_s"]
    return (f"- **1T GPT on 3072 A100s** (`clustersim simulate examples/gpt-1t-3072-a100.yaml`): {hw:.1f} hardware "
            f"TFLOP/s per GPU against the published {PUBLISHED_1T_TFLOPS:.0f} "
            f"({100 * (hw / PUBLISHED_1T_TFLOPS - 1):+.1f}%); iteration {t:.1f} s against {published_s:.1f} s; bubble "
            f"fraction {body['bubble_fraction']:.3f}, pipeline overhead {body['pipeline_overhead']:.3f} (the (p-1)/m "
            f"closed form is {63 / 512:.3f} for equal stages; the first and last stages also embed and compute the "
            f"logits). Critical rank: compute {b['compute']:.1f} s, recompute {b['recompute']:.1f} s, TP "
            f"{b['tp_comm']:.1f} s, PP {b['pp_comm']:.1f} s, DP {b['dp_comm']:.1f} s, optimizer and per-iteration "
            f"host time {b['optimizer']:.2f} s, bubble {b['bubble']:.1f} s.")


def _all_reduce_s(num_gpus: int, size_bytes: float) -> float:
    cluster = build_cluster(sized(DGX_A100, num_gpus))
    model = CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO)
    return model.isolated_time(Collective.ALL_REDUCE, [list(range(num_gpus))], size_bytes)


def collectives() -> str:
    one = bus_bandwidth(Collective.ALL_REDUCE, 8, GIB, _all_reduce_s(8, GIB)) / 1e9
    two = bus_bandwidth(Collective.ALL_REDUCE, 16, GIB, _all_reduce_s(16, GIB)) / 1e9
    small = _all_reduce_s(8, 8) * 1e6
    return (f"- **Collectives** (NCCL's choice, `auto`, the default): all-reduce bus bandwidth of 1 GiB: "
            f"{one:.0f} GB/s in one DGX A100 (NCCL: ~230), {two:.0f} GB/s across two (NCCL: 192); an 8-byte "
            f"all-reduce in a node: {small:.0f} us (NCCL on H100: 13-20 us).")


def _bubble(schedule: Schedule, m: int, v: int = 1) -> float:
    layout = Layout(dp=1, tp=1, pp=P, microbatch_size=4, global_batch_size=4 * m, schedule=schedule, virtual_stages=v)
    scenario = Scenario(model_from_fields(BUBBLE_MODEL), sized(DGX_A100, P), layout, free_communication=True)
    return simulate(scenario).metrics.bubble_fraction


def bubble() -> str:
    worst = 0.0
    for m in MICROBATCHES:
        for schedule in (Schedule.ONE_F_ONE_B, Schedule.GPIPE):
            worst = max(worst, abs(_bubble(schedule, m) - (P - 1) / (m + P - 1)))
        worst = max(worst, abs(_bubble(Schedule.INTERLEAVED_1F1B, m, 2) - (P - 1) / (2 * m + P - 1)))
    return (f"- **Bubble**: with free communication and {P} equal stages, 1F1B and GPipe give (p-1)/(m+p-1) and "
            f"interleaved (v = 2) gives (p-1)/(2m+p-1), within {worst:.4f}, for m = {MICROBATCHES[0]} to "
            f"{MICROBATCHES[-1]}.")


def _tp_example(name: str) -> dict[str, Any]:
    body: dict[str, Any] = to_response(simulate(to_scenario(load_request_file(
        str(ROOT / "examples" / "tp-across-nodes" / f"{name}.yaml")))))
    return body


def _tp_per_layer_s(body: dict[str, Any]) -> float:
    layers = sum(stage["layers"].get("transformer", 0) for stage in body["stages"])
    return float(body["communication_s"]["tp"]) / layers


def tp_across_nodes() -> str:
    tp16, tp8 = _tp_example("tp16"), _tp_example("tp8-pp2")
    tp16_one, tp8_one = _tp_example("tp16-1nic"), _tp_example("tp8-pp2-1nic")
    ratio = _tp_per_layer_s(tp16_one) / _tp_per_layer_s(tp8_one)
    return (f"- **TP across nodes** (`examples/tp-across-nodes/`): with 8 NICs TP 16 takes "
            f"{tp16['iteration_time_s']:.1f} s against {tp8['iteration_time_s']:.1f} s for TP 8 + PP 2; with one NIC "
            f"per node TP 16's TP time per layer is {ratio:.0f}x TP 8's.")


def render() -> str:
    """The four bullets, wrapped as the README's prose is."""
    return "\n".join(textwrap.fill(bullet, width=116, subsequent_indent="  ", break_on_hyphens=False)
                     for bullet in (one_t(), collectives(), bubble(), tp_across_nodes()))


def with_checks(text: str, block: str) -> str:
    """README.md's text with `block` between the markers."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    fresh = with_checks(text, render())
    if "--check" in argv:
        print("README.md carries the current checks" if fresh == text else "README.md's other checks are stale")
        return 0 if fresh == text else 1
    README.write_text(fresh, encoding="utf-8")
    print(f"wrote the other checks into {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
