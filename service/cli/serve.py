"""The `serve` and `validate` commands of `clustersim` (registered by service.cli.main).

    serve [--host H] [--port P] [--workers N] [--log-level L]   the HTTP API (uvicorn); CLUSTERSIM_* settings
    validate [--json] [--reference FILE]                        predictions against published training runs (and,
                                                                without --reference, MLPerf Training's runs)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_serve_commands", "cmd_serve", "cmd_validate"]


def cmd_validate(args: argparse.Namespace) -> int:
    from service.mlperf_table import render_mlperf_table, run_mlperf_validation
    from simcore.calibration.validate import render_table, run_validation

    report = run_validation(args.reference)
    # The published MLPerf runs (service/mlperf_table.py) belong to the shipped reference: not with --reference.
    mlperf = None if args.reference else run_mlperf_validation()
    if args.json:
        print(json.dumps(report if mlperf is None else {**report, "mlperf": mlperf}, indent=2))
    else:
        print(render_table(report) if mlperf is None else f"{render_table(report)}\n\n{render_mlperf_table(mlperf)}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn
    from pydantic import ValidationError

    from service.http.app import create_app
    from service.settings import Settings

    given = {"workers": args.workers, "port": args.port, "host": args.host}
    try:
        settings = Settings(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        sys.stderr.write(f"clustersim: invalid setting: {'.'.join(map(str, first['loc']))}: {message}\n")
        return 2
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level,
                timeout_graceful_shutdown=10, limit_concurrency=settings.max_connections)
    return 0


def add_serve_commands(subparsers: Any) -> None:
    """Register `validate` and `serve` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser("validate", help="compare predictions with published training runs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--reference", metavar="FILE", help="training-runs JSON (default: the copy shipped inside)")
    p.set_defaults(func=cmd_validate)
    p = subparsers.add_parser("serve", help="run the HTTP API (uvicorn); settings from CLUSTERSIM_* variables")
    p.add_argument("--host", help="address to listen on (default: CLUSTERSIM_HOST, else 127.0.0.1)")
    p.add_argument("--port", type=int, help="TCP port (default: CLUSTERSIM_PORT, else 8000)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="simulation processes at once (default: CLUSTERSIM_WORKERS, else the CPU count)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve)
