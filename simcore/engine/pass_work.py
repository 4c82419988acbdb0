"""What one pipeline pass costs its rank's compute stream: its duration and how that time splits into compute,
recomputation, exposed tensor-parallel communication and a mixture of experts' all-to-alls (seconds), the
tensor-parallel time hidden under its GEMMs, its tensor-parallel and all-to-all bytes, and its spans for a trace.

- F: the chunk's forward pass; B: its whole backward pass (recomputation, input and weight gradients);
- I: the backward pass less its weight gradients (B in the zero-bubble papers); W: the weight gradients alone;
- FB: DualPipe's overlapped pair, a forward pass and another microbatch's whole backward pass at once: their
  kernels take the sum of their times, and each one's tensor-parallel communication hides under the other's
  kernels (only what outlasts them is exposed). DeepSeek-V3 report, section 3.2.1; in the zero-bubble notation
  the pair takes T_F + T_B + T_W. With a mixture of experts the pair runs its pieces (attention side, dispatch,
  expert side, combine) on a compute and a communication stream, each half's all-to-alls beside the other's
  kernels (simcore/engine/pair_overlap.py); what interference adds to the kernels counts as compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.workload import ChunkCost
from simcore.domain.passes import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, OVERLAPPED
from simcore.engine.pair_overlap import pair_timing
from simcore.engine.recorder import Category, RankRecord

# How a pass is named in the trace.
LABELS = {FORWARD: "fwd", "B": "bwd", BACKWARD_INPUT: "bwd-input", BACKWARD_WEIGHT: "bwd-weight",
          OVERLAPPED: "fwd+bwd"}


@dataclass(frozen=True, slots=True)
class PassWork:
    duration: float
    compute: float
    recompute: float
    tp_comm: float  # exposed: on the compute stream
    tp_busy: float  # exposed and hidden
    tp_bytes: float
    ep_comm: float = 0.0  # the all-to-alls (and expert-TP collectives), on the compute stream
    ep_bytes: float = 0.0
    ep_hidden: float = 0.0  # all-to-all time under the other half's kernels (an overlapped pair's)

    @property
    def kernel_share(self) -> float:
        """The share of the pass that its kernels take (what slows beside collectives)."""
        return (self.compute + self.recompute) / self.duration if self.duration > 0 else 0.0


def pass_work(direction: str, cost: ChunkCost, backward: ChunkCost | None = None) -> PassWork:
    """The work of a pass of `direction` on chunk `cost` (for FB, `cost` is the forward half's chunk and
    `backward` the backward half's)."""
    if direction == FORWARD:
        return PassWork(cost.forward_s, cost.forward_compute_s, 0.0, cost.forward_tp_s,
                        cost.forward_tp_s + cost.tp_hidden_forward_s, cost.tp_bytes_forward,
                        cost.forward_ep_s, cost.ep_bytes_forward)
    if direction == BACKWARD_WEIGHT:
        return PassWork(cost.backward_weight_s, cost.backward_weight_s, 0.0, 0.0, 0.0, 0.0)
    if direction == OVERLAPPED:
        assert backward is not None
        if cost.moe_layers or backward.moe_layers:
            return _moe_pair(cost, backward)
        f_kernels = cost.forward_compute_s
        b_recompute = backward.recompute_s - backward.recompute_tp_s - backward.recompute_ep_s
        b_kernels = b_recompute + backward.backward_compute_s
        f_tp, b_tp = cost.forward_tp_s, backward.backward_tp_s + backward.recompute_tp_s
        exposed = max(0.0, f_tp - b_kernels) + max(0.0, b_tp - f_kernels)
        return PassWork(f_kernels + b_kernels + exposed, f_kernels + backward.backward_compute_s,
                        b_recompute, exposed,
                        f_tp + cost.tp_hidden_forward_s + b_tp + backward.tp_hidden_backward_s,
                        cost.tp_bytes_forward + backward.tp_bytes_backward)
    split = direction == BACKWARD_INPUT
    return PassWork(cost.backward_input_s if split else cost.backward_s,
                    cost.backward_compute_s - cost.backward_weight_s if split else cost.backward_compute_s,
                    cost.recompute_s - cost.recompute_tp_s - cost.recompute_ep_s,
                    cost.backward_tp_s + cost.recompute_tp_s,
                    cost.backward_tp_s + cost.recompute_tp_s + cost.tp_hidden_backward_s, cost.tp_bytes_backward,
                    cost.backward_ep_s + cost.recompute_ep_s, cost.ep_bytes_backward)


def _moe_pair(forward: ChunkCost, backward: ChunkCost) -> PassWork:
    """An overlapped pair with MoE layers (simcore/engine/pair_overlap.py): its exposed communication split
    between tensor-parallel and all-to-all time in proportion to their busy times."""
    timing = pair_timing(forward, backward)
    tp = forward.forward_tp_s + backward.backward_tp_s + backward.recompute_tp_s
    ep = forward.forward_ep_s + backward.backward_ep_s + backward.recompute_ep_s
    exposed = timing.exposed
    tp_exposed = exposed * tp / (tp + ep) if tp + ep > 0 else 0.0
    ep_exposed = exposed - tp_exposed
    return PassWork(timing.duration, forward.forward_compute_s + backward.backward_compute_s + timing.slowed,
                    backward.recompute_s - backward.recompute_tp_s - backward.recompute_ep_s, tp_exposed,
                    tp + forward.tp_hidden_forward_s + backward.tp_hidden_backward_s,
                    forward.tp_bytes_forward + backward.tp_bytes_backward,
                    ep_exposed, forward.ep_bytes_forward + backward.ep_bytes_backward, max(0.0, ep - ep_exposed))


def pass_parts(direction: str, cost: ChunkCost, label: str,
               backward: ChunkCost | None = None) -> list[tuple[Category, str, float]]:
    """A pass as consecutive (category, name, seconds) spans: recomputation, compute, tensor-parallel time and
    a mixture of experts' all-to-alls."""
    ep = "ep dispatch+combine "
    if direction == FORWARD:
        return [(Category.COMPUTE, label, cost.forward_compute_s),
                (Category.TP_COMM, "tp " + label, cost.forward_tp_s),
                (Category.EP_COMM, ep + label, cost.forward_ep_s)]
    if direction == BACKWARD_WEIGHT:
        return [(Category.COMPUTE, label, cost.backward_weight_s)]
    if direction == OVERLAPPED:
        assert backward is not None
        work = pass_work(direction, cost, backward)
        return [(Category.RECOMPUTE, "recompute " + label, work.recompute), (Category.COMPUTE, label, work.compute),
                (Category.TP_COMM, "tp " + label, work.tp_comm), (Category.EP_COMM, ep + label, work.ep_comm)]
    weight = cost.backward_weight_s if direction == BACKWARD_INPUT else 0.0
    return [(Category.RECOMPUTE, "recompute " + label, cost.recompute_s - cost.recompute_tp_s - cost.recompute_ep_s),
            (Category.TP_COMM, "tp recompute " + label, cost.recompute_tp_s),
            (Category.EP_COMM, ep + "recompute " + label, cost.recompute_ep_s),
            (Category.COMPUTE, label, cost.backward_compute_s - weight),
            (Category.TP_COMM, "tp " + label, cost.backward_tp_s),
            (Category.EP_COMM, ep + label, cost.backward_ep_s)]


@dataclass(slots=True)
class PassTotals:
    """What a rank's passes add to its record, summed in pass order (the same sums as adding to the record's
    dicts pass by pass, which nothing else adds to) and added once at the end."""

    busy: float = 0.0
    compute: float = 0.0
    recompute: float = 0.0
    tp_comm: float = 0.0
    tp_busy: float = 0.0
    tp_bytes: float = 0.0
    ep_comm: float = 0.0
    ep_bytes: float = 0.0
    ep_hidden: float = 0.0

    def add(self, work: PassWork, slowed: float) -> None:
        """A pass's work, and what interference added to it (`slowed`, compute)."""
        self.busy += work.duration + slowed
        self.compute += slowed
        self.compute += work.compute
        self.recompute += work.recompute
        self.tp_comm += work.tp_comm
        self.tp_busy += work.tp_busy
        self.tp_bytes += work.tp_bytes
        self.ep_comm += work.ep_comm
        self.ep_bytes += work.ep_bytes
        self.ep_hidden += work.ep_hidden

    def tp_late(self, seconds: float) -> None:
        """What the links' sharing added to a pass's tensor-parallel time (TP on the links)."""
        self.tp_comm += seconds
        self.tp_busy += seconds
        self.busy += seconds

    def add_to(self, record: RankRecord) -> None:
        t = record.time_s
        record.busy_s += self.busy
        t[Category.COMPUTE] += self.compute
        t[Category.RECOMPUTE] += self.recompute
        t[Category.TP_COMM] += self.tp_comm
        record.comm_busy_s["tp"] += self.tp_busy
        record.comm_bytes["tp"] += self.tp_bytes
        t[Category.EP_COMM] += self.ep_comm
        record.comm_busy_s["ep"] += self.ep_comm + self.ep_hidden
        record.comm_bytes["ep"] += self.ep_bytes
