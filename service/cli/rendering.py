"""What the command line's tables and summaries are printed on (rich)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["console"]

# A file or a pipe has no width of its own: wide enough for a few table columns without wrapping.
PIPE_WIDTH = 200


def console() -> Any:
    """A rich Console on stdout: the terminal's width, or PIPE_WIDTH columns when stdout is not a terminal. No
    colour when the NO_COLOR variable is set to anything but the empty string (no-color.org), nor off a
    terminal."""
    from rich.console import Console

    no_color = os.environ.get("NO_COLOR", "") != ""
    out = Console(no_color=no_color)
    return out if out.is_terminal else Console(width=PIPE_WIDTH, no_color=no_color)
