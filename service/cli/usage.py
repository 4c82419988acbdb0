"""Usage errors of the command line: a flag the command cannot use (an output path it cannot write, an option
that does not apply). They are invalid input, like a bad request field: exit 2, one line on stderr naming the
flag and the rule, and they are checked before anything is simulated, so a long run never ends in a traceback
because its output cannot be written."""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
from typing import Any

__all__ = ["UsageError", "add_limits_option", "check_executor", "job_limits", "within_limits", "writable_dir",
           "writable_file"]


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
    from service.executors import EXECUTORS

    if executor not in EXECUTORS:
        raise UsageError("--executor", f"must be one of {', '.join(EXECUTORS)}, not '{executor}'")
    if address is not None and executor != "ray":
        raise UsageError("--address", "only applies to --executor ray")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError("--executor", "ray is not installed: pip install 'clustersim[ray]'")


def add_limits_option(parser: Any) -> None:
    """The --no-limits flag of a command that simulates (an argparse parser)."""
    parser.add_argument("--no-limits", action="store_true",
                        help="run even what the service's limits refuse (CLUSTERSIM_MAX_GPUS, estimated time and "
                        "memory)")


def _settings_limits() -> Any:
    """The job limits of the CLUSTERSIM_* settings; an invalid one is a UsageError naming the variable."""
    from pydantic import ValidationError

    from service.settings import Settings

    try:
        return Settings().limits(inline=False)
    except ValidationError as err:
        first = err.errors()[0]
        raise UsageError(f"CLUSTERSIM_{'.'.join(map(str, first['loc'])).upper()}", first["msg"]) from None


def job_limits() -> Any:
    """The job limits (service.limits.Limits) the service would admit a simulation under: those of the
    CLUSTERSIM_* settings, or the defaults without pydantic-settings' import when none is set."""
    from service.limits import default_job_limits

    if any(name.upper().startswith("CLUSTERSIM_") for name in os.environ):
        return _settings_limits()
    return default_job_limits()


def within_limits(scenario: Any, lifted: bool, source: str = "") -> None:
    """Refuse (UsageError on --no-limits, exit 2) a valid scenario over the limits the service would admit it as
    a job under (service.limits, from the CLUSTERSIM_* settings), unless `lifted`. `source` names the file when
    the command reads several."""
    if lifted:
        return
    from service.limits import LimitError, admit_scenario
    from simcore import check

    check(scenario)
    try:
        admit_scenario(scenario, job_limits())
    except LimitError as err:
        where = f"{source}: " if source else ""
        raise UsageError(f"{where}{err.field}", f"{err.message}; the service would refuse it too (--no-limits "
                         "runs it anyway)") from None


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1, else a message saying so with what was given."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 (given {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 (given {value})")
    return value
