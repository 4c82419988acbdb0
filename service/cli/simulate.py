"""The `simulate` and `presets` commands of `clustersim` (registered by service.cli.main).

    simulate FILE [--json|--summary] [--strict] [--trace FILE] [--timeline FILE] [--plot FILE]
                                                     a summary on a terminal, else (or with --json) the result
                                                     JSON; a Chrome trace, span lines, a picture
    presets [models|clusters|gpus] [--json|--summary]
                                                     the preset catalogs as tables on a terminal, else as JSON

The output files are checked before anything is simulated (service.cli.usage): one that cannot be written is
invalid input, exit 2. A layout that does not fit in its GPUs' memory is said on stderr; with --strict
`simulate` then exits DOES_NOT_FIT (3), after printing the result as usual.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import Any

from service.cli import plot
from service.cli.summary import add_output_options, print_presets, print_summary, wants_json
from service.cli.usage import add_limits_option, within_limits, writable_file

__all__ = ["DOES_NOT_FIT", "add_simulate_commands", "cmd_presets", "cmd_simulate"]

# The exit code of `simulate --strict` on a layout that does not fit in memory (0 success, 1 internal error,
# 2 invalid input and 130 interrupted are the others: service/cli/main.py).
DOES_NOT_FIT = 3


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


def cmd_simulate(args: argparse.Namespace) -> int:
    from api_schemas import load_request_file
    from service import convert
    from simcore import simulate

    for flag, path in (("--trace", args.trace), ("--timeline", args.timeline)):
        if path:
            writable_file(flag, path)
    plot.check_plot_target(args.plot)
    request = load_request_file(args.file)
    scenario = convert.to_scenario(request)
    if args.trace or args.timeline or plot.needs_spans(args):
        scenario = convert.replace_spans(scenario)
    within_limits(scenario, args.no_limits)
    # The collector paused while the engine runs (as the search's workers do, simcore/planning/worker.py): it
    # allocates hundreds of thousands of short-lived objects and makes no reference cycles, so the collector
    # would only scan them again and again (about a tenth of the 1T example's simulation).
    collecting = gc.isenabled()
    gc.disable()
    try:
        outcome = simulate(scenario)
    finally:
        if collecting:
            gc.enable()
    body = convert.to_response(outcome, request=request)
    if wants_json(args):
        print(_dump(body))
    else:
        print_summary(body, scenario)
    plot.write_result_plot(args, request, body, outcome.spans)
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(convert.chrome_trace(outcome.spans), f)
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            for span in outcome.spans:
                f.write(json.dumps({"track": span.track, "name": span.name, "category": span.category,
                                    "start_s": span.start_s, "end_s": span.end_s}) + "\n")
    return _memory_verdict(body["memory"], args.strict)


def _memory_verdict(memory: dict[str, Any], strict: bool) -> int:
    """The exit code of a simulated layout: DOES_NOT_FIT under --strict when it does not fit in memory (said on
    stderr in any case), else 0."""
    if memory["fits"]:
        return 0
    sys.stderr.write(f"clustersim: the layout does not fit in memory: {memory['peak_gib_per_gpu']:.1f} GiB per GPU "
                     f"at its peak, {memory['capacity_gib']:.0f} GiB on the GPU"
                     + (f" (--strict: exit {DOES_NOT_FIT})" if strict else "") + "\n")
    return DOES_NOT_FIT if strict else 0


def cmd_presets(args: argparse.Namespace) -> int:
    from service import convert

    catalog = convert.presets(args.kind)
    if wants_json(args):
        print(_dump(catalog))
    else:
        print_presets(catalog)
    return 0


def add_simulate_commands(subparsers: Any) -> None:
    """Register `simulate` and `presets` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser(
        "simulate", help="simulate one request (JSON or YAML); a summary on a terminal, else the result JSON",
        description="Simulate one training iteration of a request (JSON or YAML). On a terminal it prints a short "
        "summary; to a pipe or a file, or with --json, the result JSON. A layout that does not fit in memory is "
        f"said on stderr; with --strict the command then exits {DOES_NOT_FIT}.")
    p.add_argument("file")
    add_output_options(p, "the summary")
    p.add_argument("--strict", action="store_true",
                   help=f"exit {DOES_NOT_FIT} when the layout does not fit in its GPUs' memory (the result is "
                   "printed all the same)")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto) of the iteration")
    p.add_argument("--timeline", metavar="FILE", help="write every span as JSON lines")
    plot.add_simulate_plot_options(p)
    add_limits_option(p)
    p.set_defaults(func=cmd_simulate)
    p = subparsers.add_parser("presets", help="list presets: tables on a terminal, else JSON")
    p.add_argument("kind", nargs="?", choices=["models", "clusters", "gpus"])
    add_output_options(p, "the tables")
    p.set_defaults(func=cmd_presets)
