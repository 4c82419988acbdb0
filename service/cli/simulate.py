"""The `simulate` and `presets` commands of `clustersim` (registered by service.cli.main).

    simulate FILE [--trace FILE] [--timeline FILE] [--plot FILE]
                                                     the result JSON on stdout; a Chrome trace, span lines, a picture
    presets [models|clusters|gpus]                   the preset catalogs as JSON

The output files are checked before anything is simulated (service.cli.usage): one that cannot be written is
invalid input, exit 2.
"""

from __future__ import annotations

import argparse
import gc
import json
from typing import Any

from service.cli import plot
from service.cli.usage import add_limits_option, within_limits, writable_file

__all__ = ["add_simulate_commands", "cmd_presets", "cmd_simulate"]


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
    print(_dump(body))
    plot.write_result_plot(args, request, body, outcome.spans)
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(convert.chrome_trace(outcome.spans), f)
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            for span in outcome.spans:
                f.write(json.dumps({"track": span.track, "name": span.name, "category": span.category,
                                    "start_s": span.start_s, "end_s": span.end_s}) + "\n")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    from service import convert

    print(_dump(convert.presets(args.kind)))
    return 0


def add_simulate_commands(subparsers: Any) -> None:
    """Register `simulate` and `presets` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser("simulate", help="simulate one request (JSON or YAML); result JSON on stdout")
    p.add_argument("file")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto) of the iteration")
    p.add_argument("--timeline", metavar="FILE", help="write every span as JSON lines")
    plot.add_simulate_plot_options(p)
    add_limits_option(p)
    p.set_defaults(func=cmd_simulate)
    p = subparsers.add_parser("presets", help="list presets")
    p.add_argument("kind", nargs="?", choices=["models", "clusters", "gpus"])
    p.set_defaults(func=cmd_presets)
