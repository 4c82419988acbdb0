"""Ray tasks on a Ray cluster (`pip install clustersim[ray]`): an executor of searches and sweeps
(service.executors). A Ray that is not installed, a cluster that cannot be reached or a worker or node that dies
raises `ExecutorError`; a task's own exception reaches the caller unchanged."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from service.executors.ray_keeper import KeeperError, LocalRay, use_auth_mode
from service.executors.windowed import windowed
from simcore.planning.executor import ExecutorError

__all__ = ["RayExecutor"]


class RayExecutor:
    """Ray tasks on the Ray cluster at `address` (RAY_ADDRESS when None and set), or on a local Ray runtime of
    its own, or on the runtime this process already started. clustersim must be importable on every Ray node.

    A local runtime of its own is started by a keeper process (service.executors.ray_keeper) that ends every Ray
    process of it when this executor closes or this process dies, SIGKILL included."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("ray is not installed: pip install 'clustersim[ray]'", "executor") from None
        self._ray = ray
        self._owned = False
        self._local: LocalRay | None = None
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS") or None
            if address is None:
                try:
                    self._local = LocalRay(workers)
                except KeeperError as err:
                    raise ExecutorError(str(err)) from None
                use_auth_mode(self._local.auth_mode)
            try:
                ray.init(address=self._local.address if self._local else address, logging_level=logging.ERROR,
                         log_to_driver=False)
            except ConnectionError as err:
                if self._local is not None:
                    self._stop_local()
                    raise ExecutorError(f"cannot connect to the local Ray runtime it started: {err}") from None
                raise ExecutorError(f"cannot reach a Ray cluster at {address!r}: {err}", "address") from None
            except BaseException:
                self._stop_local()
                raise
            self._owned = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = max(1, min(workers, cpus) if workers else cpus)

    def run(self, fn: Callable[[Any], Any], items: Iterator[Any], on_result: Callable[[Any], None],
            stop: Callable[[], bool]) -> None:
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)

        def wait_one(pending: list[Any]) -> tuple[list[Any], list[Any]]:
            done, rest = ray.wait(pending, num_returns=1)
            return [ray.get(ref) for ref in done], list(rest)

        try:
            windowed(remote.remote, wait_one, self._cancel, 2 * self.workers, items, on_result, stop)
        except ray.exceptions.RayTaskError:  # the task's own exception (ray.get raises it as its own type too)
            raise
        except ray.exceptions.RayError as err:  # a worker or node died, the cluster went away
            raise ExecutorError(f"the Ray executor failed: {err}") from err

    def _cancel(self, ref: Any) -> None:
        """Cancel a task still in flight after Ctrl-C or a failure. On a local runtime of its own, nothing: `close`
        kills every process of it. Cancelling there raced with the task's own completion: Ray 2.60's driver
        aborted ("Tried to complete task that was not pending", task_manager.cc) in 2 of 10 Ctrl-Cs measured with
        bench/orphan_workers.py, and the search exited 1 instead of 130. On a cluster that outlives the search, the
        task is asked to stop (KeyboardInterrupt in its worker) rather than its worker killed."""
        if self._local is None:
            self._ray.cancel(ref, force=False)

    def _stop_local(self) -> None:
        if self._local is not None:
            self._local.stop()
            self._local = None

    def close(self) -> None:
        """Disconnect from Ray (this process's own runtime: shut it down), then end the local runtime with
        whatever still runs there (after Ctrl-C or a failure: the tasks `run` cancelled). In this order: a
        driver whose cluster has gone spends seconds in `ray.shutdown` trying to reach it."""
        try:
            if self._owned:
                self._ray.shutdown()
        finally:
            self._stop_local()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
