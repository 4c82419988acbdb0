"""The `compare` command of `clustersim` (registered by service.cli.main through add_compare_command).

    compare FILE... [--json] [--plot OUT.svg|OUT.png]

Simulates each request file (YAML or JSON, as `simulate` reads it) and prints a table with one column per file
(labelled by the file's name without its extension; by its path where two names are the same) and one row per
figure, or with --json the comparison document (service.compare). An invalid file: exit 2, one line on stderr
naming the file, the field and the rule; nothing is simulated. --plot also draws the candidates side by side
(each one's iteration time split by category, service.plots); a picture that cannot be written is invalid
input, said before anything is simulated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.plot import check_plot_target
from service.cli.rendering import console
from service.cli.usage import add_limits_option, within_limits
from service.naming import precision_name

if TYPE_CHECKING:
    from api_schemas import RequestError, SimulationRequest

__all__ = ["METRICS", "add_compare_command", "labels_for", "render_comparison"]


def _seconds(value: float) -> str:
    return f"{value:.4g}"


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _fits(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _schedule(layout: dict[str, Any]) -> str:
    v = layout["virtual_stages"]
    return f"{layout['schedule']} v{v}" if v > 1 else str(layout["schedule"])


# (row name, how to show it from a comparison row), in table order: every parallel dimension, the GPU and the
# precision first, so that a column says what ran.
METRICS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("DP x TP x PP", lambda r: f"{r['layout']['dp']} x {r['layout']['tp']} x {r['layout']['pp']}"),
    ("CP", lambda r: str(r["layout"].get("cp") or 1)),
    ("EP", lambda r: str(r["layout"].get("ep") or 1)),
    ("GPU", lambda r: str(r.get("gpu") or "-")),
    ("precision", lambda r: precision_name(r["layout"].get("precision"), r["layout"].get("fp8_recipe"),
                                                  r["layout"].get("fp8_scaling"))),
    ("microbatch size", lambda r: str(r["layout"]["microbatch_size"])),
    ("schedule", lambda r: _schedule(r["layout"])),
    ("ZeRO stage", lambda r: str(r["layout"]["zero_stage"])),
    ("recompute", lambda r: str(r["layout"]["recompute"])),
    ("iteration time s", lambda r: _seconds(r["iteration_time_s"])),
    ("tokens/s", lambda r: f"{r['tokens_per_s']:,.0f}"),
    ("MFU", lambda r: _percent(r["mfu"])),
    ("bubble fraction", lambda r: _percent(r["bubble_fraction"])),
    ("stage imbalance", lambda r: f"{r['stage_imbalance']:.3f}"),
    ("exposed tp s", lambda r: _seconds(r["exposed_communication_s"]["tp"])),
    ("exposed pp s", lambda r: _seconds(r["exposed_communication_s"]["pp"])),
    ("exposed dp s", lambda r: _seconds(r["exposed_communication_s"]["dp"])),
    ("exposed cp s", lambda r: _seconds(r["exposed_communication_s"].get("cp", 0.0))),
    ("exposed ep s", lambda r: _seconds(r["exposed_communication_s"].get("ep", 0.0))),
    ("peak GiB/GPU", lambda r: _gib(r["memory"]["peak_gib_per_gpu"])),
    ("capacity GiB", lambda r: _gib(r["memory"]["capacity_gib"])),
    ("fits", lambda r: _fits(r["memory"]["fits"])),
]

# Rows shown where a request has a training section (the whole run, checkpoints and failures included).
TRAINING_METRICS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("training days", lambda t: f"{t['days']:.1f}"),
    ("GPU-hours", lambda t: f"{t['gpu_hours']:,.0f}"),
    ("cost USD", lambda t: "-" if t.get("cost_usd") is None else f"{t['cost_usd']:,.0f}"),
    ("goodput", lambda t: f"{t['goodput']:.3f}"),
]


def labels_for(files: Sequence[str]) -> list[str]:
    """A column label per file: its name without the extension, or its path where names repeat (and a #n suffix
    where a path repeats)."""
    stems = [Path(f).stem for f in files]
    labels = [stem if stems.count(stem) == 1 else f for stem, f in zip(stems, files)]
    out = []
    for index, label in enumerate(labels):
        out.append(label if labels.count(label) == 1 else f"{label} #{labels[:index].count(label) + 1}")
    return out


def render_comparison(result: dict[str, Any]) -> None:
    """The comparison as a table on stdout: a column per request, a row per figure."""
    from rich.table import Table

    out = console()
    table = Table(title="Comparison")
    table.add_column("metric")
    for row in result["rows"]:
        table.add_column(row["label"], justify="right")
    for name, show in METRICS:
        kind = name.split()[1] if name.startswith("exposed ") else None
        if kind in ("cp", "ep") and not any(kind in row["exposed_communication_s"] for row in result["rows"]):
            continue  # no request has that kind of parallelism
        table.add_row(name, *(show(row) for row in result["rows"]))
    if any("training" in row for row in result["rows"]):
        for name, show in TRAINING_METRICS:
            table.add_row(name, *(show(row["training"]) if "training" in row else "-" for row in result["rows"]))
    out.print(table)
    for row in result["rows"]:
        for warning in row["warnings"]:
            out.print(f"{row['label']}: {warning}")


def _invalid(path: str, err: RequestError) -> int:
    from api_schemas.errors import WHOLE_REQUEST

    first = err.details[0]
    # A file that cannot be read or parsed is already named in the rule.
    named = first.field in ("file", WHOLE_REQUEST) and path in first.rule
    sys.stderr.write(f"clustersim: invalid input: {err if named else f'{path}: {err}'}\n")
    return 2


def cmd_compare(args: argparse.Namespace) -> int:
    from api_schemas import RequestError, load_request_file
    from service import convert
    from service.compare import ComparisonError, compare_results, comparison
    from service.plots import comparison_figure, save
    from simcore import SpecError

    check_plot_target(args.plot)
    items: list[tuple[str, SimulationRequest]] = []
    for path, label in zip(args.files, labels_for(args.files)):
        try:
            items.append((label, load_request_file(path)))
        except RequestError as err:
            return _invalid(path, err)
        with contextlib.suppress(RequestError, SpecError):  # an invalid one is named by compare_results below
            scenario = convert.to_scenario(items[-1][1])
            within_limits(scenario, args.no_limits, path)
    try:
        results = compare_results(items)
    except ComparisonError as err:
        return _invalid(args.files[err.index], err.error)
    result = comparison(results)
    if args.plot:
        save(comparison_figure([label for label, _, _ in results], [r for _, _, r in results]), args.plot)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render_comparison(result)
    return 0


def add_compare_command(subparsers: Any) -> None:
    """Register `compare` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser("compare", help="simulate several requests and show their figures side by side")
    p.add_argument("files", nargs="+", metavar="FILE", help="request files (YAML or JSON), one column each")
    p.add_argument("--json", action="store_true", help="print the comparison JSON instead of a table")
    p.add_argument("--plot", metavar="FILE", help="draw the requests side by side, time by category (.svg or .png)")
    add_limits_option(p)
    p.set_defaults(func=cmd_compare)
