"""Usage errors of the command line: a flag the command cannot use (an output path it cannot write, an option
that does not apply). They are invalid input, like a bad request field: exit 2, one line on stderr naming the
flag and the rule, and they are checked before anything is simulated, so a long run never ends in a traceback
because its output cannot be written."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["UsageError", "check_executor", "writable_dir", "writable_file"]


class UsageError(Exception):
    """A flag the command cannot use: `flag` (``--trace``) and the `rule` it breaks."""

    def __init__(self, flag: str, rule: str) -> None:
        super().__init__(f"{flag}: {rule}")
        self.flag = flag
        self.rule = rule


def _folder(flag: str, path: str, folder: Path) -> None:
    if not folder.exists():
        raise UsageError(flag, f"cannot write {path}: no directory {folder}")
    if not folder.is_dir():
        raise UsageError(flag, f"cannot write {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(flag, f"cannot write {path}: directory {folder} is not writable")


def writable_file(flag: str, path: str) -> None:
    """UsageError unless a file can be written at `path`: its directory exists and is writable, and the path is
    not a directory or a read-only file."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(flag, f"cannot write {path}: it is a directory")
    _folder(flag, path, target.parent)
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(flag, f"cannot write {path}: the file is read-only")


def writable_dir(flag: str, path: str) -> None:
    """UsageError unless `path` is a writable directory or can be made one (its nearest existing ancestor is a
    writable directory)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(flag, f"cannot write into {path}: it is not a directory")
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    _folder(flag, path, existing)


def check_executor(executor: str, address: str | None) -> None:
    """UsageError for executor flags that cannot work: one that is not an executor, --address without ray, ray
    when it is not installed."""
    from simcore.planning.executors import EXECUTORS

    if executor not in EXECUTORS:
        raise UsageError("--executor", f"must be one of {', '.join(EXECUTORS)}, not '{executor}'")
    if address is not None and executor != "ray":
        raise UsageError("--address", "only applies to --executor ray")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError("--executor", "ray is not installed: pip install 'clustersim[ray]'")
