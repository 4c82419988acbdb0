"""What `clustersim simulate` and `clustersim presets` print on a terminal: a short summary of one result and the
preset catalogs as tables, in place of the JSON they print to a pipe or a file (or with --json).

The summary reads every figure from the result document the JSON would carry (so the two never disagree) and the
scenario it simulated for what the result does not echo (the GPU of a cluster preset, the model's size). Lines:
model, cluster, layout, batch, iteration time, throughput, MFU, bubble, exposed communication by kind, the busy
communication time by kind, memory against capacity, a training run where the request has one, and the warnings.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from service.cli.rendering import console
from service.naming import precision_name

if TYPE_CHECKING:
    from simcore import Scenario

__all__ = ["add_output_options", "presets_tables", "print_presets", "print_summary", "summary_rows", "wants_json"]


def add_output_options(parser: Any, what: str) -> None:
    """--json and --summary (exclusive) on a command that prints a JSON document or, on a terminal, `what`."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true",
                       help="print the JSON document (what a pipe or a file gets without a flag)")
    group.add_argument("--summary", action="store_true", help=f"print {what} even when stdout is not a terminal")


def wants_json(args: argparse.Namespace) -> bool:
    """JSON with --json, or without --summary when stdout is not a terminal (pipes, files, tests)."""
    if args.json:
        return True
    if args.summary:
        return False
    return not sys.stdout.isatty()


def _seconds(value: float) -> str:
    return f"{value:.4g} s"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _count(value: float) -> str:
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:,.0f}"


def _model(body: dict[str, Any], scenario: Scenario) -> str:
    shape = scenario.model
    name = body["request"]["model"].get("preset", "custom model")
    if shape.encoder_decoder:
        layers = f"{shape.encoder_layers} encoder + {shape.decoder_layers} decoder layers"
        seq = f"seq {shape.seq_length} -> {shape.decoder_seq_length}"
    else:
        layers, seq = f"{shape.num_layers} layers", f"seq {shape.seq_length}"
    experts = "" if shape.moe is None else f", {shape.moe.num_experts} experts (top {shape.moe.top_k})"
    return (f"{name}: {shape.architecture}, {_count(shape.total_parameters())} parameters, {layers}, "
            f"hidden {shape.hidden_size}, {seq}{experts}")


def _cluster(body: dict[str, Any], scenario: Scenario) -> str:
    spec = scenario.cluster
    name = body["request"]["cluster"].get("preset", "custom cluster")
    if spec.node_groups:
        groups = " + ".join(f"{g.num_nodes} nodes of {g.gpus_per_node} {g.hardware.label}" for g in spec.node_groups)
        return f"{name}: {spec.num_gpus} GPUs ({groups})"
    gpu = spec.gpu_spec.label if spec.gpu_spec is not None else str(spec.gpu)
    nodes = -(-spec.num_gpus // spec.gpus_per_node)
    return f"{name}: {spec.num_gpus} x {gpu} ({nodes} node{'s' if nodes > 1 else ''} of {spec.gpus_per_node})"


def _layout(layout: dict[str, Any]) -> str:
    dims = " x ".join(f"{k.upper()} {layout.get(k, 1)}" for k in ("dp", "tp", "pp", "cp", "ep"))
    v = layout.get("virtual_stages", 1)
    extras = [str(layout["schedule"]), f"{v} virtual stage{'s' if v > 1 else ''}"]
    if layout.get("sequence_parallel"):
        extras.append("sequence parallel")
    return f"{dims}; {', '.join(extras)}"


def _batch(layout: dict[str, Any]) -> str:
    microbatches = layout["global_batch_size"] // (layout["dp"] * layout["microbatch_size"])
    return (f"microbatch {layout['microbatch_size']}, global batch {layout['global_batch_size']} "
            f"({microbatches} microbatches per pipeline)")


def _settings(layout: dict[str, Any]) -> str:
    precision = str(layout.get("precision", "bf16"))
    if precision == "fp8" and (layout.get("fp8_recipe") or layout.get("fp8_scaling")):
        precision = precision_name(precision, layout.get("fp8_recipe"), layout.get("fp8_scaling"))
    return f"ZeRO {layout['zero_stage']}, recompute {layout['recompute']}, {precision}"


def _exposed(body: dict[str, Any], layout: dict[str, Any]) -> str:
    """The communication the critical rank's compute stream waited for, by kind (the result puts ZeRO's traffic
    in dp_comm), with its share of the iteration."""
    breakdown, total = body["time_breakdown_s"], body["iteration_time_s"]
    parts = []
    for key, value in breakdown.items():
        if key.endswith("_comm"):
            kind = key.removesuffix("_comm")
            if kind == "dp" and layout.get("zero_stage", 0) > 0:
                kind = "dp+zero"
            parts.append(f"{kind} {_seconds(value)}")
    waited = sum(v for k, v in breakdown.items() if k.endswith("_comm"))
    return f"{', '.join(parts)} ({_percent(waited / total)} of the iteration)"


def _busy(body: dict[str, Any]) -> str:
    parts = ", ".join(f"{kind} {_seconds(value)}" for kind, value in body["communication_s"].items())
    return f"{parts} (sum over stages, overlapped included)"


def _memory(memory: dict[str, Any]) -> str:
    fits = "fits" if memory["fits"] else "[bold red]does NOT fit[/]"
    return f"{memory['peak_gib_per_gpu']:.1f} GiB peak per GPU of {memory['capacity_gib']:.0f} GiB: {fits}"


def _memory_split(memory: dict[str, Any]) -> str:
    parts = ", ".join(f"{k.replace('optimizer_states', 'optimizer').replace('_', ' ')} {v:.1f}"
                      for k, v in memory["breakdown_gib"].items())
    return f"{parts} GiB (the peak stage)"


def _training(training: dict[str, Any]) -> str:
    """The whole run, failures and checkpoints included (the result's `training.with_failures`)."""
    run = training["with_failures"]
    cost = "" if run.get("cost_usd") is None else f", {run['cost_usd']:,.0f} USD"
    return (f"{training['tokens']:.3g} tokens in {run['days']:.1f} days, {run['gpu_hours']:,.0f} GPU-hours{cost}, "
            f"goodput {training['goodput']:.3f}")


def summary_rows(body: dict[str, Any], scenario: Scenario) -> list[tuple[str, str]]:
    """(label, text) per line of the summary of result `body` (the JSON document, its request echoed) of
    `scenario`; the text may carry rich markup."""
    layout = body["request"]["layout"]
    rows = [
        ("model", _model(body, scenario)),
        ("cluster", _cluster(body, scenario)),
        ("layout", _layout(layout)),
        ("batch", _batch(layout)),
        ("settings", _settings(layout)),
        ("iteration time", f"[bold]{_seconds(body['iteration_time_s'])}[/]"),
        ("throughput", f"{body['tokens_per_s']:,.0f} tokens/s, {body['samples_per_s']:.4g} samples/s"),
        ("MFU", f"[bold]{_percent(body['mfu'])}[/] ({body['model_tflops_per_gpu']:.1f} TFLOP/s per GPU); "
                f"HFU {_percent(body['hfu'])}"),
        ("bubble", f"{_percent(body['bubble_fraction'])} of the iteration (mean over stages); pipeline overhead "
                   f"{_percent(body['pipeline_overhead'])}"),
        ("exposed comm", _exposed(body, layout)),
        ("comm busy", _busy(body)),
        ("memory", _memory(body["memory"])),
        ("memory split", _memory_split(body["memory"])),
    ]
    if "training" in body:
        rows.append(("training run", _training(body["training"])))
    warnings = body["warnings"]
    if not warnings:
        rows.append(("warnings", "none"))
    for warning in warnings:
        rows.append(("warning", f"[yellow]{_escape(warning)}[/]"))
    return rows


def _escape(text: str) -> str:
    from rich.markup import escape

    return str(escape(text))


def print_summary(body: dict[str, Any], scenario: Scenario) -> None:
    """The summary of `body` on stdout (rich: no colour with NO_COLOR or off a terminal)."""
    rows = summary_rows(body, scenario)
    width = max(len(label) for label, _ in rows) + 2
    out = console()
    out.print(f"[bold]clustersim {body['simulator']['version']}[/]: one training iteration", highlight=False)
    for label, text in rows:
        out.print(f"[bold]{label.ljust(width)}[/]{text}", highlight=False)


def _model_rows(catalog: dict[str, Any]) -> list[list[str]]:
    from simcore import MODEL_PRESETS, model_from_fields

    rows = []
    for name, fields in catalog.items():
        shape = model_from_fields(MODEL_PRESETS[name])
        layers = (f"{shape.encoder_layers}+{shape.decoder_layers}" if shape.encoder_decoder
                  else str(shape.num_layers))
        seq = (f"{shape.seq_length}/{shape.decoder_seq_length}" if shape.encoder_decoder else str(shape.seq_length))
        experts = "-" if shape.moe is None else f"{shape.moe.num_experts} (top {shape.moe.top_k})"
        rows.append([name, str(fields["architecture"]), _count(shape.total_parameters()), layers,
                     str(shape.hidden_size), f"{shape.num_attention_heads}/{shape.num_kv_heads}",
                     str(shape.ffn_hidden_size), seq, str(shape.vocab_size), experts])
    return rows


def presets_tables(catalog: dict[str, Any]) -> list[Any]:
    """A rich Table per catalog in `catalog` (what `service.convert.presets` gives), in its order."""
    from rich.table import Table

    columns = {
        "models": ["model", "architecture", "parameters", "layers", "hidden", "heads/kv", "FFN", "seq", "vocab",
                   "experts"],
        "clusters": ["cluster", "GPU", "GPUs/node", "NVLink GB/s", "NICs", "NIC Gbit/s", "fabric",
                     "NVLink domain"],
        "gpus": ["GPU", "bf16 TFLOP/s", "fp8 TFLOP/s", "HBM GiB", "HBM GB/s", "NVLink GB/s", "TDP W"],
    }
    titles = {"models": "Model presets", "clusters": "Cluster presets (per node)", "gpus": "GPUs"}
    tables = []
    for kind, entries in catalog.items():
        if kind == "models":
            rows = _model_rows(entries)
        elif kind == "clusters":
            rows = [[name, c["gpu"], str(c["gpus_per_node"]), f"{c['nvlink_bandwidth_gb_per_s']:g}",
                     str(c["nics_per_node"]), f"{c['nic_bandwidth_gbit_per_s']:g}", c["fabric"],
                     str(c["nvlink_domain_gpus"])] for name, c in entries.items()]
        else:
            rows = [[name, f"{g['peak_tflops_bf16']:g}", f"{g['peak_tflops_fp8']:g}" if g["peak_tflops_fp8"] else "-",
                     f"{g['memory_gib']:g}", f"{g['hbm_bandwidth_gb_per_s']:g}", f"{g['nvlink_bandwidth_gb_per_s']:g}",
                     "-" if g["tdp_w"] is None else f"{g['tdp_w']:g}"] for name, g in entries.items()]
        table = Table(title=titles[kind], title_justify="left")
        for index, column in enumerate(columns[kind]):
            table.add_column(column, justify="left" if index == 0 or column in ("architecture", "GPU", "fabric")
                             else "right", no_wrap=index == 0)
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables


def print_presets(catalog: dict[str, Any]) -> None:
    """The preset catalogs as tables on stdout."""
    out = console()
    for table in presets_tables(catalog):
        out.print(table)
