"""What pictures exist and the file formats they are written in: names only, without matplotlib, so that the
command line can offer them (and check an output file's name) before anything heavy is imported."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FORMATS", "KINDS", "NEEDS_SPANS", "format_of"]

KINDS = ("timeline", "breakdown", "memory")  # the pictures of one simulated request
NEEDS_SPANS = frozenset({"timeline"})  # those drawn from the simulation's spans, not the result document
FORMATS = ("svg", "png")


def format_of(path: str | os.PathLike[str]) -> str:
    """'svg' or 'png' from a file name; ValueError for anything else."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise ValueError(f"a picture is written as .svg or .png, not '{Path(path).name}'")
    return suffix
