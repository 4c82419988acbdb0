"""The limits a simulation is admitted under, shared by the HTTP service and the CLI: the cluster's size, the
microbatches, and what `simcore.run_cost.estimate_cost` predicts it will cost (engine events, wall time, peak
memory of its process). A request over one is refused before anything is built (HTTP 413, CLI exit 2 with
``--no-limits`` to lift them), so no request makes the service, or a shell, run for hours or run out of memory.

The service admits an inline simulation under its inline limits and a job under its job limits; the CLI uses
the job limits of the same settings (``CLUSTERSIM_*``), so a request the service would refuse as a job is one
the CLI refuses too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from simcore import Scenario
from simcore.run_cost import Cost, estimate_cost

__all__ = ["MAX_GPUS", "MAX_INLINE_EVENTS", "MAX_INLINE_SECONDS", "MAX_JOB_EVENTS", "MAX_JOB_SECONDS",
           "MAX_MICROBATCHES", "MAX_TRACE_BYTES", "MIB", "LimitError", "Limits", "admit_scenario",
           "default_job_limits", "default_workers", "machine_memory_bytes", "memory_cap_mb"]

MIB = 1024 * 1024
# The limits' defaults (service.settings.Settings' fields of the same names, CLUSTERSIM_* unset).
MAX_GPUS, MAX_MICROBATCHES, MAX_TRACE_BYTES = 16_384, 8_192, 256 * MIB
MAX_INLINE_EVENTS, MAX_JOB_EVENTS, MAX_INLINE_SECONDS, MAX_JOB_SECONDS = 500_000, 20_000_000, 20.0, 1800.0
# The estimate may be short by up to 3x (bench/admission.py): a run is admitted when its estimated peak memory
# is at most this share of its process's memory cap, so that the cap is not what ends it.
MEMORY_HEADROOM = 0.5


def machine_memory_bytes() -> int:
    """The machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024 * MIB


def default_workers() -> int:
    """Simulation processes at once when CLUSTERSIM_WORKERS is unset: one per CPU."""
    return max(1, os.cpu_count() or 1)


def memory_cap_mb(worker_memory_mb: int | None, workers: int) -> int:
    """The memory cap of each simulation process: `worker_memory_mb`, or the machine's memory shared by the
    2 x workers processes that may run at once (jobs and inline runs), at least 1 GiB."""
    if worker_memory_mb is not None:
        return worker_memory_mb
    return max(1024, machine_memory_bytes() // (2 * workers) // MIB)


class LimitError(Exception):
    """A request over a limit: the field that drives it, the rule, and the estimate and limit for the client."""

    def __init__(self, field: str, rule: str, message: str, extra: dict[str, float | int]) -> None:
        super().__init__(message)
        self.field, self.rule, self.message, self.extra = field, rule, message, extra


@dataclass(frozen=True, slots=True)
class Limits:
    """What one simulation may be and cost (memory in bytes of its process)."""

    max_gpus: int
    max_microbatches: int
    max_events: int
    max_seconds: float
    memory_bytes: int
    max_trace_bytes: int

    def _over(self, cost: Cost) -> LimitError | None:
        if cost.events > self.max_events:
            return LimitError("request", f"estimated engine events must be <= {self.max_events}",
                              f"this simulation needs about {cost.events} engine events, over the limit of "
                              f"{self.max_events}", {"estimated_events": cost.events, "limit": self.max_events})
        if cost.seconds > self.max_seconds:
            return LimitError("request", f"estimated time must be <= {self.max_seconds:g} s",
                              f"this simulation would take about {cost.seconds:.1f} s, over the limit of "
                              f"{self.max_seconds:g} s", {"estimated_events": cost.events,
                                                          "estimated_seconds": round(cost.seconds, 3),
                                                          "limit_s": self.max_seconds})
        if cost.trace_bytes > self.max_trace_bytes:
            return LimitError("options.trace", f"estimated trace must be <= {self.max_trace_bytes} bytes",
                              f"this simulation's trace would be about {cost.trace_bytes // MIB} MiB compressed, "
                              f"over the limit of {self.max_trace_bytes // MIB} MiB",
                              {"estimated_trace_bytes": cost.trace_bytes, "limit_bytes": self.max_trace_bytes})
        allowed = int(self.memory_bytes * MEMORY_HEADROOM)
        if cost.memory_bytes > allowed:
            return LimitError("request", f"estimated memory must be <= {allowed // MIB} MiB",
                              f"this simulation would need about {cost.memory_bytes // MIB} MiB, over the limit of "
                              f"{allowed // MIB} MiB (half its process's memory cap)",
                              {"estimated_events": cost.events, "estimated_memory_mb": cost.memory_bytes // MIB,
                               "limit_mb": allowed // MIB})
        return None


def default_job_limits() -> Limits:
    """The job limits of the default settings (Settings().limits(inline=False) with no CLUSTERSIM_* variable
    set), without reading the settings (pydantic-settings' import is most of a short command's start-up)."""
    return Limits(max_gpus=MAX_GPUS, max_microbatches=MAX_MICROBATCHES,
                  max_events=MAX_JOB_EVENTS, max_seconds=MAX_JOB_SECONDS,
                  memory_bytes=memory_cap_mb(None, default_workers()) * MIB,
                  max_trace_bytes=MAX_TRACE_BYTES)


def admit_scenario(scenario: Scenario, limits: Limits) -> Cost:
    """The scenario's estimated cost if it is within `limits`; LimitError naming the first limit it is over."""
    gpus = scenario.cluster.num_gpus
    if gpus > limits.max_gpus:
        raise LimitError("cluster.num_gpus", f"GPU count must be <= {limits.max_gpus}",
                         f"GPU count {gpus} is over this service's limit of {limits.max_gpus}",
                         {"limit": limits.max_gpus})
    microbatches = scenario.layout.num_microbatches
    if microbatches > limits.max_microbatches:
        raise LimitError("layout.global_batch_size", f"microbatch count must be <= {limits.max_microbatches}",
                         f"microbatch count {microbatches} is over this service's limit of "
                         f"{limits.max_microbatches}", {"limit": limits.max_microbatches})
    cost = estimate_cost(scenario)
    over = limits._over(cost)
    if over is not None:
        raise over
    return cost
