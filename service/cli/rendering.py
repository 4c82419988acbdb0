"""What the command line's tables are printed on (rich)."""

from __future__ import annotations

from typing import Any

__all__ = ["console"]

# A file or a pipe has no width of its own: wide enough for a few table columns without wrapping.
PIPE_WIDTH = 200


def console() -> Any:
    """A rich Console on stdout: the terminal's width, or PIPE_WIDTH columns when stdout is not a terminal."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=PIPE_WIDTH)
