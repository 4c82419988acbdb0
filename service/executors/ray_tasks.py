"""Ray tasks on a Ray cluster (`pip install clustersim[ray]`): an executor of searches and sweeps
(service.executors). A Ray that is not installed, a cluster that cannot be reached or a worker or node that dies
raises `ExecutorError`; a task's own exception reaches the caller unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from service.executors.windowed import windowed
from simcore.planning.executor import ExecutorError

__all__ = ["RayExecutor"]


class RayExecutor:
    """Ray tasks on the Ray cluster at `address` (or a local Ray runtime when there is none, or the runtime this
    process already started). clustersim must be importable on every Ray node."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ExecutorError("ray is not installed: pip install 'clustersim[ray]'", "executor") from None
        self._ray = ray
        self._owned = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "logging_level": "ERROR",
                                      "log_to_driver": False}
            if address is None and workers:
                kwargs["num_cpus"] = workers
            try:
                ray.init(**kwargs)
            except ConnectionError as err:
                raise ExecutorError(f"cannot reach a Ray cluster at {address!r}: {err}", "address") from None
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
            windowed(remote.remote, wait_one, lambda ref: ray.cancel(ref, force=True), 2 * self.workers, items,
                      on_result, stop)
        except ray.exceptions.RayTaskError:  # the task's own exception (ray.get raises it as its own type too)
            raise
        except ray.exceptions.RayError as err:  # a worker or node died, the cluster went away
            raise ExecutorError(f"the Ray executor failed: {err}") from err

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
