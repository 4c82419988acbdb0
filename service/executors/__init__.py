"""Where search candidates and sweep points run, built from the command line's and the requests' strings: in this
process (one worker), in a local process pool (the default), or as Ray tasks on a Ray cluster
(`pip install clustersim[ray]`). Each implements simcore.planning.executor's `Executor`, the protocol the search
runs its candidates through; the pure core never starts a process itself.

- pool.py: `LocalExecutor`, a pool of worker processes on this machine, each ending with this process.
- lifeline.py: how a pool's workers notice that the process that owns the pool has died, and end.
- ray_tasks.py: `RayExecutor`, Ray tasks on a Ray cluster (or a local Ray runtime of its own).
- ray_keeper.py: the keeper process below which a local Ray runtime runs, ending it with its owner (SIGKILL too).
- windowed.py: the window of tasks in flight that both keep (twice the workers), cancelled on a failure.

The modules that start processes are imported when an executor is made: importing this package (the command
line's flag check) imports neither multiprocessing's pools nor Ray.
"""

from __future__ import annotations

import os

from simcore.planning.executor import Executor, ExecutorError, InlineExecutor

__all__ = ["EXECUTORS", "ExecutorError", "make_executor"]

EXECUTORS = ("local", "ray")


def make_executor(kind: str = "local", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor a CLI flag or request names: 'local' (one worker: this process) or 'ray'. ExecutorError
    naming the option at fault for a kind that is not one, an address without Ray, or Ray that cannot start."""
    if kind == "ray":
        from service.executors.ray_tasks import RayExecutor

        return RayExecutor(address, workers)
    if kind != "local":
        raise ExecutorError(f"must be one of {', '.join(EXECUTORS)}", "executor")
    if address is not None:
        raise ExecutorError("only applies to the ray executor", "address")
    count = max(1, workers or os.cpu_count() or 1)
    if count == 1:
        return InlineExecutor()
    from service.executors.pool import LocalExecutor

    return LocalExecutor(count)
