"""A local Ray runtime that ends with the process that started it.

`ray.init()` with no address starts a Ray head node (GCS server, raylet, dashboard, log monitor) as children of
the calling process, and the raylet starts agents and task workers below itself. When that process is killed with
SIGKILL (a CI timeout, the out-of-memory killer), Ray's own fate sharing ends only part of it: the head's processes
die with it (the kernel's parent-death signal), the task workers notice their raylet is gone 2-3 s later, but the
dashboard and runtime-env agents try to report the raylet's death to the GCS that died too, and were measured still
running 30 s later (Ray 2.60).

So a search or sweep never starts its local Ray in its own process. `LocalRay` starts a keeper process
(`python -m service.executors.ray_keeper`), which starts the Ray runtime as its own driver and tells the owner its
address; the owner connects to it as to any cluster. The keeper:
- is a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER): every process below it whose parent dies becomes its
  child rather than init's, so it can still find every Ray process it started, agents and workers included;
- reads its stdin, a pipe whose write end only the owner holds: the read returns end-of-file when the owner
  closes it (`LocalRay.stop`) or when the kernel closes it because the owner died, however it died; the keeper
  then kills (SIGKILL) every process below it, reaps them and exits. Nothing is left to be graceful for: the
  owner has gone or has already disconnected;
- runs in a session of its own, so a terminal's Ctrl-C reaches the owner alone, which stops the keeper at once.

Linux-only parts (the subreaper, /proc) are skipped elsewhere; the keeper then ends its runtime with
`ray.shutdown()`, which stops what Ray's own process ownership reaches.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO

__all__ = ["KeeperError", "LocalRay", "use_auth_mode"]

# <linux/prctl.h>: make the calling process a subreaper of its orphaned descendants.
PR_SET_CHILD_SUBREAPER = 36
REAP_DEADLINE_S = 10.0  # the keeper gives up on a process that SIGKILL has not ended by then (none ever should)


class KeeperError(RuntimeError):
    """The keeper could not start a Ray runtime; the message ends with the last line it wrote (the error)."""


class LocalRay:
    """The owner's handle on a keeper and its Ray runtime: `address` to connect to, `stop` to end it all."""

    def __init__(self, num_cpus: int | None = None, start_timeout_s: float = 300.0) -> None:
        """Start the keeper and wait (up to `start_timeout_s`) until its Ray runtime answers. `num_cpus`: the
        runtime's CPU count (None: Ray's default, every CPU)."""
        argv = [sys.executable, "-m", __name__] + ([str(num_cpus)] if num_cpus else [])
        # The keeper imports this module: it is given the owner's import path, as a spawned worker would be.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # A file, not a pipe: what Ray writes can never block the keeper. Read only if it fails to start.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr, env=env, start_new_session=True)
        try:
            self.address, _, self.auth_mode = self._read_address(start_timeout_s).partition(" ")
        except BaseException:
            self.stop()
            raise
        finally:
            self._stderr.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    def _read_address(self, timeout_s: float) -> str:
        line = _readline(self._process.stdout, timeout_s) if self._process.stdout is not None else ""
        if line:
            return line
        self.stop()
        self._stderr.seek(0)
        said = self._stderr.read().decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"no answer within {timeout_s:g} s (exit status {self._process.returncode})"
        raise KeeperError(f"the local Ray runtime did not start: {why}")

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the runtime and every process below the keeper, and wait for the keeper to exit (killed after
        `timeout_s`)."""
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()



def use_auth_mode(mode: str) -> None:
    """Connect to a keeper's runtime with the authentication mode it uses (`LocalRay.auth_mode`; '' where Ray
    has none). Ray reads the mode from the environment variable RAY_AUTH_MODE (the same on every process of a
    cluster) and caches it when imported; `ray.init()` that starts a runtime sets the variable and refreshes the
    cache, and this does the same for the runtime the keeper started."""
    if not mode or os.environ.get("RAY_AUTH_MODE") == mode:
        return
    os.environ["RAY_AUTH_MODE"] = mode
    # What ray.init does after setting the variable for a runtime it starts (Ray 2.52+; an older Ray has no
    # authentication, nor this).
    config = getattr(importlib.import_module("ray._raylet"), "Config", None)
    if config is not None:
        config.initialize("")


def _readline(stream: IO[bytes], timeout_s: float) -> str:
    """One line from a pipe, '' at end-of-file or when none came within `timeout_s`."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        end, data = time.monotonic() + timeout_s, b""
        while not data.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not selector.select(left):
                return ""
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                return ""
            data += chunk
    return data.decode().strip()


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _children_by_parent() -> dict[int, list[int]]:
    """Every living process's pid, by its parent's pid (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rindex(")") + 2:].split()
        if fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _descendants(pid: int) -> list[int]:
    children = _children_by_parent()
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants(deadline_s: float = REAP_DEADLINE_S) -> None:
    """SIGKILL every process below this one and reap them, until none is left (a subreaper sees each orphan of
    its tree become its child, so an empty wait means an empty tree) or `deadline_s` passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not _descendants(os.getpid()):
                return
        time.sleep(0.01)


def main(argv: list[str]) -> None:
    """The keeper: start Ray (argv: [num_cpus]), print its address, wait for end-of-file on stdin, end it all.
    If Ray does not start, or the owner has gone before it could be told, what went wrong goes to stderr and
    whatever had started is ended all the same."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner decides when to stop (module docstring)
    reaps = _become_subreaper()
    status, started = 0, None
    try:
        import ray

        started = ray
        # "local": a runtime of its own, even where a `ray start` cluster runs on this machine (which ray.init()
        # with no address would join, and which is not the keeper's to end)
        ray.init(address="local", num_cpus=int(argv[0]) if argv else None, include_dashboard=False,
                 logging_level=logging.ERROR, log_to_driver=False)
        # The address, then the authentication mode Ray chose for the runtime (RAY_AUTH_MODE: a runtime it starts
        # uses tokens by default since Ray 2.59), which whoever connects must use too.
        print(ray.get_runtime_context().gcs_address, os.environ.get("RAY_AUTH_MODE", ""), flush=True)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nobody reads that pipe any more: a full one would block
        sys.stdin.buffer.read()  # the owner never writes: this returns when its end is closed
    except BaseException:
        traceback.print_exc()
        status = 1
    if reaps:
        kill_descendants()
    elif started is not None:
        with contextlib.suppress(Exception):
            started.shutdown()
    os._exit(status)


if __name__ == "__main__":
    main(sys.argv[1:])
