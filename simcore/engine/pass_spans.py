"""A pass as the trace shows it: consecutive named spans of recomputation, compute, tensor-parallel collectives
and a mixture of experts' all-to-alls on its rank's compute track (the engine's timing is the pass's single
event; these spans only divide it for the trace and the pictures), a pass's wait for its input, and FSDP's end of
backward waiting for its gradient reductions."""

from __future__ import annotations

from simcore.cost.workload import ChunkCost
from simcore.domain.schedules import OVERLAPPED, Pass
from simcore.engine.clock import Clock, Event, Process
from simcore.engine.pass_work import LABELS, pass_parts
from simcore.engine.recorder import Category, Recorder


def pass_label(ps: Pass, chunks: int) -> str:
    """'fwd mb3', 'bwd-input mb3 chunk1' with several chunks per rank, 'fwd+bwd mb5+mb1' for an overlapped pair."""
    label = f"{LABELS[ps.direction]} mb{ps.microbatch}"
    if ps.direction == OVERLAPPED:
        label += f"+mb{ps.backward_microbatch}"
    return label + (f" chunk{ps.chunk}" if chunks > 1 else "")


def record_pass_spans(rec: Recorder, track: str, ps: Pass, cost: ChunkCost, start: float, stretch: float,
                      chunks: int, now: float, tp_start: float | None = None,
                      backward: ChunkCost | None = None) -> None:
    """The pass's spans from `start`; the compute spans `stretch`ed by what interference added to the pass.
    With `tp_start` (TP on the links) the kernels come first and the TP collectives run from `tp_start` to
    `now`. `backward`: an overlapped pair's backward chunk."""
    label = pass_label(ps, chunks)
    parts = pass_parts(ps.direction, cost, label, backward)
    if tp_start is not None:
        rec.span(track, "tp " + label, Category.TP_COMM, tp_start, now)
        parts = [part for part in parts if part[0] != Category.TP_COMM]
    communication = (Category.TP_COMM, Category.EP_COMM)  # the collectives do not stretch with the kernels
    kernels = sum(duration for category, _name, duration in parts if category not in communication)
    extra = (stretch - 1.0) * sum(duration for _c, _n, duration in parts)
    for category, name, duration in parts:
        if category not in communication and kernels > 0:
            duration += extra * duration / kernels
        rec.span(track, name, category, start, start + duration)
        start += duration


def account_wait(rec: Recorder, t: dict[str, float], track: str, waited: float, now: float, produced: float,
                 ps: Pass) -> None:
    """A pass waited from `waited` to `now` for an activation or a gradient sent at `produced`: idle (bubble)
    until it was sent, then its transfer (pp_comm), in the rank's times `t` and, when kept, as spans."""
    bubble_end = min(max(produced, waited), now)
    t[Category.BUBBLE] += bubble_end - waited
    t[Category.PP_COMM] += now - bubble_end
    if rec.keep_spans:
        rec.span(track, f"idle: wait {ps.direction}{ps.microbatch}", Category.BUBBLE, waited, bubble_end)
        rec.span(track, f"recv {ps.direction}{ps.microbatch}", Category.PP_COMM, bubble_end, now)


def wait_reductions(clock: Clock, rec: Recorder, t: dict[str, float], track: str, reductions: list[Event]) -> Process:
    """FSDP's end of backward: the compute stream waits for the pass's gradient reductions (dp_comm)."""
    waited = clock.now
    for event in reductions:
        if not event.processed:
            yield event
    t[Category.DP_COMM] += clock.now - waited
    rec.span(track, "wait gradient reduce-scatter", Category.DP_COMM, waited, clock.now)
