"""A pass as the trace shows it: consecutive named spans of recomputation, compute, tensor-parallel collectives
and a mixture of experts' all-to-alls on its rank's compute track (the engine's timing is the pass's single
event; these spans only divide it for the trace and the pictures)."""

from __future__ import annotations

from simcore.cost.workload import ChunkCost
from simcore.domain.schedules import BACKWARD, Pass
from simcore.engine.recorder import Recorder


def pass_label(ps: Pass, virtual_stages: int) -> str:
    """'fwd mb3', or 'bwd mb3 chunk1' with interleaving."""
    label = f"{'fwd' if ps.direction != BACKWARD else 'bwd'} mb{ps.microbatch}"
    return label + (f" chunk{ps.chunk}" if virtual_stages > 1 else "")


def record_pass_spans(rec: Recorder, track: str, ps: Pass, cost: ChunkCost, start: float, stretch: float,
                      virtual_stages: int, now: float, tp_start: float | None = None) -> None:
    """The pass's spans from `start`; the compute spans `stretch`ed by what interference added to the pass.
    With `tp_start` (TP on the links) the kernels come first and the TP collectives run from `tp_start` to
    `now`."""
    label = pass_label(ps, virtual_stages)
    ep = "ep dispatch+combine "
    if ps.direction != BACKWARD:
        parts = [("compute", label, cost.forward_compute_s), ("tp_comm", "tp " + label, cost.forward_tp_s),
                 ("ep_comm", ep + label, cost.forward_ep_s)]
    else:
        parts = [("recompute", "recompute " + label, cost.recompute_s - cost.recompute_tp_s - cost.recompute_ep_s),
                 ("tp_comm", "tp recompute " + label, cost.recompute_tp_s),
                 ("ep_comm", ep + "recompute " + label, cost.recompute_ep_s),
                 ("compute", label, cost.backward_compute_s), ("tp_comm", "tp " + label, cost.backward_tp_s),
                 ("ep_comm", ep + label, cost.backward_ep_s)]
    if tp_start is not None:
        rec.span(track, "tp " + label, "tp_comm", tp_start, now)
        parts = [part for part in parts if part[0] != "tp_comm"]
    communication = ("tp_comm", "ep_comm")  # the collectives do not stretch with the kernels
    kernels = sum(duration for category, _name, duration in parts if category not in communication)
    extra = (stretch - 1.0) * sum(duration for _c, _n, duration in parts)
    for category, name, duration in parts:
        if category not in communication and kernels > 0:
            duration += extra * duration / kernels
        rec.span(track, name, category, start, start + duration)
        start += duration
