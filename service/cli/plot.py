"""Pictures from the command line (registered by service.cli.main):

    simulate FILE --plot OUT.svg|OUT.png [--plot-kind timeline|breakdown|memory]
    plot TRACE.json --out OUT.svg|OUT.png [--title TEXT]

`simulate --plot` draws the simulated iteration (the pipeline timeline by default); `plot` draws the timeline
of a Chrome trace saved by `simulate --trace`, or of a result document that carries one (`options.trace` in
the API), its rows then as long as the iteration. The format follows the file's suffix. A picture that
cannot be written (unknown suffix, missing or read-only folder) is invalid input: exit 2, said before anything
is simulated.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.usage import UsageError, writable_file
from service.plots.kinds import KINDS, NEEDS_SPANS, format_of

if TYPE_CHECKING:
    from api_schemas import SimulationRequest

__all__ = ["add_plot_command", "add_simulate_plot_options", "check_plot_target", "needs_spans", "write_result_plot"]


def check_plot_target(path: str | None, option: str = "--plot") -> None:
    """Raise UsageError (exit 2) unless a picture can be written at `path`: an .svg or .png name that
    service.cli.usage.writable_file accepts."""
    if path is None:
        return
    try:
        format_of(path)
    except ValueError as err:
        raise UsageError(option, str(err)) from None
    writable_file(option, path)


def add_simulate_plot_options(parser: argparse.ArgumentParser) -> None:
    """--plot FILE and --plot-kind for `simulate`."""
    parser.add_argument("--plot", metavar="FILE", help="draw the iteration as a picture (.svg or .png)")
    parser.add_argument("--plot-kind", choices=KINDS, default="timeline",
                        help="what --plot draws: the pipeline timeline (default), where the time goes "
                             "(breakdown) or memory per stage")


def needs_spans(args: argparse.Namespace) -> bool:
    """Whether the simulation must keep its spans for the picture asked for."""
    return bool(getattr(args, "plot", None)) and args.plot_kind in NEEDS_SPANS


def write_result_plot(args: argparse.Namespace, request: SimulationRequest, result: Any, spans: Any) -> None:
    """Draw `simulate --plot`'s picture of a result (the response document) and its spans."""
    if getattr(args, "plot", None):
        from service.plots import result_figure, save

        save(result_figure(args.plot_kind, result, spans=spans, request=request), args.plot)


def cmd_plot(args: argparse.Namespace) -> int:
    from service.plots import save, spans_from_chrome_trace, timeline_figure

    check_plot_target(args.out, "--out")
    try:
        text = Path(args.trace).read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError("trace", f"cannot read '{args.trace}': {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise UsageError("trace", f"'{args.trace}' is not UTF-8 text") from None
    try:
        trace = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError("trace", f"'{args.trace}' is not JSON (line {err.lineno}: {err.msg})") from None
    iteration_s = None
    if isinstance(trace, dict) and isinstance(trace.get("trace"), dict):  # a result document with its trace
        iteration_s = trace.get("iteration_time_s") if isinstance(trace.get("iteration_time_s"), float) else None
        trace = trace["trace"]
    try:
        spans = spans_from_chrome_trace(trace)
        figure = timeline_figure(spans, iteration_time_s=iteration_s,
                                 title=args.title or f"Pipeline timeline of {Path(args.trace).name}")
    except ValueError as err:
        raise UsageError("trace", f"'{args.trace}': {err}") from None
    save(figure, args.out)
    return 0


def add_plot_command(sub: Any) -> None:
    p = sub.add_parser("plot", help="draw the pipeline timeline of a saved Chrome trace (.svg or .png)")
    p.add_argument("trace", metavar="TRACE.json",
                   help="a Chrome trace written by `simulate --trace`, or a result document with its trace")
    p.add_argument("--out", required=True, metavar="FILE", help="the picture to write (.svg or .png)")
    p.add_argument("--title", help="the picture's title (default: the trace's file name)")
    p.set_defaults(func=cmd_plot)
