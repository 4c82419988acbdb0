"""The container's health check: ``python -m service.cli.healthcheck`` (the Dockerfile's HEALTHCHECK).

When the container's main process (PID 1, or ``--pid N``) is ``clustersim serve``, GET /healthz on the port
that process listens on: its ``--port``, else ``CLUSTERSIM_PORT``, else 8000, read with the serve command's
own parser and settings, so the check follows the port however it was configured. Exit 0 when it answers 200,
1 otherwise. A batch command (simulate, validate, ...) serves nothing: exit 0.
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "serve_port"]

TIMEOUT_S = 4.0  # under the Dockerfile's --timeout=5s


def serve_port(command_line: Sequence[str]) -> int | None:
    """The TCP port a process with this command line serves on, or None when it is not `clustersim serve`."""
    from service.cli.main import build_parser
    from service.settings import Settings

    if "serve" not in command_line:
        return None
    args = list(command_line)[list(command_line).index("serve"):]
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:  # not a serve command line after all
        return None
    return int(parsed.port) if parsed.port is not None else Settings().port


def _command_line(pid: int) -> list[str]:
    return [part.decode("utf-8", "replace") for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.cli.healthcheck", description=__doc__)
    parser.add_argument("--pid", type=int, default=1, help="the process to check (default 1: the container's)")
    args = parser.parse_args(argv)
    port = serve_port(_command_line(args.pid))
    if port is None:
        return 0
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=TIMEOUT_S) as response:
            return 0 if response.status == 200 else 1
    except OSError as err:
        sys.stderr.write(f"healthcheck: http://127.0.0.1:{port}/healthz: {err}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
