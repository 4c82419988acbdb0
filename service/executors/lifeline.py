"""Worker processes that end with the process that started them.

A search's or sweep's local pool (service.executors.pool) simulates in worker processes. A worker must not
outlive the process that owns its pool, however that process ends (a SIGKILL from a CI timeout or the
out-of-memory killer included): an orphan would go on simulating at full CPU for minutes. Each worker runs
`watch_owner` first, which arranges two ways to notice, either enough on its own:

- On Linux, the kernel's parent-death signal (prctl PR_SET_PDEATHSIG, here SIGKILL): the kernel kills the
  worker the moment its parent dies. Its parent is the owner when the pool forks; a forkserver's child has the
  forkserver as parent, which exits when the owner does (it reads EOF on its own pipe from the owner).
- Everywhere: a thread of the worker blocks reading the lifeline, a pipe whose write end only the owner holds
  (a forked worker closes its inherited copy first). The kernel closes the owner's end when the owner dies, the
  read returns end-of-file and the worker exits at once. This is what serves a forkserver's or spawned worker
  whatever became of its parent, and systems without prctl.

A worker ignores SIGINT: Ctrl-C in a terminal signals the whole process group, and a worker interrupted mid-task
would only hand the KeyboardInterrupt back to the pool as a result and take the next task. The owner gets the
signal too and kills its workers at once (`LocalExecutor` ends them when its block ends with an exception).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["Lifeline", "watch_owner"]

# <linux/prctl.h>: set the signal the calling process receives when its parent dies.
PR_SET_PDEATHSIG = 1


class Lifeline:
    """The owner's side of the pipe its workers watch: open while the pool may have workers, closed by `close`
    (after the workers have gone) or by the kernel when the owner dies."""

    def __init__(self, context: Any) -> None:
        """`context`: the multiprocessing context the pool starts its workers with."""
        self._reader, self._writer = context.Pipe(duplex=False)
        self._forks = context.get_start_method() == "fork"

    def initargs(self) -> tuple[Any, ...]:
        """The `initargs` of `watch_owner` for the pool's initializer. A forked worker gets the write end too
        (its own inherited copy, which it must close); a worker started any other way is never given it, since
        pickling it would hand the worker a duplicate of the owner's end."""
        return (self._reader, os.getpid(), self._writer if self._forks else None)

    def close(self) -> None:
        """Close the owner's ends: any worker still running exits."""
        self._writer.close()
        self._reader.close()


def _parent_death_signal(parent: int | None) -> None:
    """Ask the kernel for SIGKILL when this process's parent dies (Linux only; elsewhere the lifeline alone
    serves). `parent`: the pid the parent must still have, when the parent is the owner."""
    if not sys.platform.startswith("linux"):
        return
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    # A parent that died between the fork and the prctl sends nothing: the worker is already an orphan.
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _exit_at_eof(reader: Connection) -> None:
    with contextlib.suppress(EOFError, OSError):
        reader.recv_bytes()  # the owner never writes: this returns only when its end is closed
    os._exit(1)  # no cleanup to wait for: whatever this worker computes has no one left to receive it


def watch_owner(reader: Connection, owner: int, inherited_writer: Connection | None) -> None:
    """The initializer of every pool worker: end this process when its owner (pid `owner`) dies, and leave
    SIGINT to the owner (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if inherited_writer is not None:  # forked: this copy of the owner's end would keep the pipe open forever
        inherited_writer.close()
    _parent_death_signal(owner if inherited_writer is not None else None)
    threading.Thread(target=_exit_at_eof, args=(reader,), name="clustersim-lifeline", daemon=True).start()
