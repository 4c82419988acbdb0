"""What the engine observed: per simulated rank, time by category, and (optionally) spans for a trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Category(StrEnum):
    """Where a rank's compute stream spends its time: the keys of the result's `time_breakdown_s` (exclusive
    seconds, the contract's definitions) and the category of each span of the trace."""

    COMPUTE = "compute"
    RECOMPUTE = "recompute"
    TP_COMM = "tp_comm"
    PP_COMM = "pp_comm"
    DP_COMM = "dp_comm"  # ZeRO's waits too
    OPTIMIZER = "optimizer"
    BUBBLE = "bubble"
    OTHER = "other"
    CP_COMM = "cp_comm"
    EP_COMM = "ep_comm"
    # the trace's only, not a share of the breakdown: steady-state periods put back by arithmetic, not simulated
    EXTRAPOLATED = "extrapolated"


# Every result's categories, in the result's order.
CATEGORIES = (Category.COMPUTE, Category.RECOMPUTE, Category.TP_COMM, Category.PP_COMM, Category.DP_COMM,
              Category.OPTIMIZER, Category.BUBBLE, Category.OTHER)
COMM_KINDS = ("tp", "pp", "dp", "zero")
# Context parallelism's (the result shows them only where cp > 1): the compute stream's waits for the K/V ring,
# and the ring's own traffic.
CP_CATEGORY, CP_KIND = Category.CP_COMM, "cp"
# Expert parallelism's (the result shows them only for a mixture of experts): the exposed all-to-alls, and their
# traffic.
EP_CATEGORY, EP_KIND = Category.EP_COMM, "ep"
ALL_CATEGORIES, ALL_KINDS = (*CATEGORIES, CP_CATEGORY, EP_CATEGORY), (*COMM_KINDS, CP_KIND, EP_KIND)


@dataclass(slots=True)
class RankRecord:
    """One simulated rank: exclusive time by category on its compute stream, and its communication totals."""

    gpu: int
    pipeline_rank: int
    time_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ALL_CATEGORIES, 0.0))
    comm_busy_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ALL_KINDS, 0.0))
    comm_bytes: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ALL_KINDS, 0.0))
    end_s: float = 0.0
    busy_s: float = 0.0  # compute stream busy (passes and optimizer)
    previous_end_s: float = 0.0  # where the iteration recorded started: the end of the one before it, if any

    def restart(self) -> None:
        """Forget what the rank did so far, to record its next iteration from the end of this one."""
        self.previous_end_s = self.end_s
        for counts in (self.time_s, self.comm_busy_s, self.comm_bytes):
            for key in counts:
                counts[key] = 0.0
        self.busy_s = 0.0


@dataclass(frozen=True, slots=True)
class Span:
    track: str  # e.g. "stage 3 compute"
    name: str
    category: Category
    start_s: float
    end_s: float


# A span shorter than this (seconds) is not kept: it is a rounding difference between two times that are equal,
# computed along two paths (an arrival and the wait for it), and a steady state put back N periods later may turn
# such a difference into a span the fully simulated run does not have, or the reverse.
MIN_SPAN_S = 1e-12


@dataclass(slots=True)
class Recorder:
    keep_spans: bool
    ranks: list[RankRecord] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    def span(self, track: str, name: str, category: Category, start: float, end: float) -> None:
        if self.keep_spans and end - start > MIN_SPAN_S:
            self.spans.append(Span(track, name, category, start, end))
