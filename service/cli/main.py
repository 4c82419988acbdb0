"""The `clustersim` command line. Exit codes: 0 success, 2 invalid input (one line on stderr), 1 internal error."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from api_schemas import RequestError, load_request_file
from service import convert as adapters
from service.cli import plot
from service.cli.compare import add_compare_command
from service.cli.search import add_search_commands
from simcore.simulate import simulate
from topology.errors import SpecError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors are invalid input too: exit 2, one line
        sys.stderr.write(f"clustersim: {message}\n")
        raise SystemExit(2)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


def cmd_simulate(args: argparse.Namespace) -> int:
    plot.check_plot_target(args.plot)
    request = load_request_file(args.file)
    scenario = adapters.to_scenario(request)
    if args.trace or args.timeline or plot.needs_spans(args):
        scenario = adapters.replace_spans(scenario)
    outcome = simulate(scenario)
    body = adapters.to_response(outcome)
    print(_dump(body))
    plot.write_result_plot(args, request, body, outcome.spans)
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(adapters.chrome_trace(outcome.spans), f)
    if args.timeline:
        with open(args.timeline, "w", encoding="utf-8") as f:
            for span in outcome.spans:
                f.write(json.dumps({"track": span.track, "name": span.name, "category": span.category,
                                    "start_s": span.start_s, "end_s": span.end_s}) + "\n")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    print(_dump(adapters.presets(args.kind)))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from simcore.calibration.validate import render_table, run_validation

    report = run_validation(args.reference)
    print(_dump(report) if args.json else render_table(report))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn
    from pydantic import ValidationError

    from service.http.app import create_app
    from service.settings import Settings

    try:
        settings = Settings(**({"workers": args.workers} if args.workers is not None else {}))
    except ValidationError as err:
        first = err.errors()[0]
        sys.stderr.write(f"clustersim: invalid setting: {'.'.join(map(str, first['loc']))}: {first['msg']}\n")
        return 2
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
                timeout_graceful_shutdown=10)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="clustersim", description="Discrete-event simulator of distributed LLM training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("simulate", help="simulate one request (JSON or YAML); result JSON on stdout")
    p.add_argument("file")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto) of the iteration")
    p.add_argument("--timeline", metavar="FILE", help="write every span as JSON lines")
    plot.add_simulate_plot_options(p)
    p.set_defaults(func=cmd_simulate)
    p = sub.add_parser("presets", help="list presets")
    p.add_argument("kind", nargs="?", choices=["models", "clusters", "gpus"])
    p.set_defaults(func=cmd_presets)
    p = sub.add_parser("validate", help="compare predictions with published training runs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--reference", metavar="FILE", help="training-runs JSON (default: the copy shipped inside)")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("serve", help="run the HTTP API (uvicorn); settings from CLUSTERSIM_* variables")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="simulation processes at once (default: CLUSTERSIM_WORKERS, else the CPU count)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve)
    add_compare_command(sub)
    plot.add_plot_command(sub)
    add_search_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RequestError as err:
        sys.stderr.write(f"clustersim: invalid input: {err}\n")
        return 2
    except SpecError as err:
        sys.stderr.write(f"clustersim: invalid input: {err.field}: {err.rule}\n")
        return 2
    except BrokenPipeError:
        return 0
    except Exception:  # an internal error: say so, with the traceback for a bug report
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
