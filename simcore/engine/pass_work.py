"""What one pipeline pass costs its rank's compute stream: its duration and how that time splits into compute,
recomputation and exposed tensor-parallel communication (seconds), the tensor-parallel time hidden under its
GEMMs, its tensor-parallel bytes, and its spans for a trace.

- F: the chunk's forward pass; B: its whole backward pass (recomputation, input and weight gradients);
- I: the backward pass less its weight gradients (B in the zero-bubble papers); W: the weight gradients alone;
- FB: DualPipe's overlapped pair, a forward pass and another microbatch's whole backward pass at once: their
  kernels take the sum of their times, and each one's tensor-parallel communication hides under the other's
  kernels (only what outlasts them is exposed). DeepSeek-V3 report, section 3.2.1; in the zero-bubble notation
  the pair takes T_F + T_B + T_W.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.workload import ChunkCost
from simcore.domain.passes import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, OVERLAPPED

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


def pass_work(direction: str, cost: ChunkCost, backward: ChunkCost | None = None) -> PassWork:
    """The work of a pass of `direction` on chunk `cost` (for FB, `cost` is the forward half's chunk and
    `backward` the backward half's)."""
    if direction == FORWARD:
        return PassWork(cost.forward_s, cost.forward_compute_s, 0.0, cost.forward_tp_s,
                        cost.forward_tp_s + cost.tp_hidden_forward_s, cost.tp_bytes_forward)
    if direction == BACKWARD_WEIGHT:
        return PassWork(cost.backward_weight_s, cost.backward_weight_s, 0.0, 0.0, 0.0, 0.0)
    if direction == OVERLAPPED:
        assert backward is not None
        f_kernels = cost.forward_compute_s
        b_kernels = backward.recompute_s - backward.recompute_tp_s + backward.backward_compute_s
        f_tp, b_tp = cost.forward_tp_s, backward.backward_tp_s + backward.recompute_tp_s
        exposed = max(0.0, f_tp - b_kernels) + max(0.0, b_tp - f_kernels)
        return PassWork(f_kernels + b_kernels + exposed, f_kernels + backward.backward_compute_s,
                        backward.recompute_s - backward.recompute_tp_s, exposed,
                        f_tp + cost.tp_hidden_forward_s + b_tp + backward.tp_hidden_backward_s,
                        cost.tp_bytes_forward + backward.tp_bytes_backward)
    split = direction == BACKWARD_INPUT
    return PassWork(cost.backward_input_s if split else cost.backward_s,
                    cost.backward_compute_s - cost.backward_weight_s if split else cost.backward_compute_s,
                    cost.recompute_s - cost.recompute_tp_s, cost.backward_tp_s + cost.recompute_tp_s,
                    cost.backward_tp_s + cost.recompute_tp_s + cost.tp_hidden_backward_s, cost.tp_bytes_backward)


def pass_parts(direction: str, cost: ChunkCost, label: str,
               backward: ChunkCost | None = None) -> list[tuple[str, str, float]]:
    """A pass as consecutive (category, name, seconds) spans: recomputation, compute, tensor-parallel time."""
    if direction == FORWARD:
        return [("compute", label, cost.forward_compute_s), ("tp_comm", "tp " + label, cost.forward_tp_s)]
    if direction == BACKWARD_WEIGHT:
        return [("compute", label, cost.backward_weight_s)]
    if direction == OVERLAPPED:
        assert backward is not None
        work = pass_work(direction, cost, backward)
        return [("recompute", "recompute " + label, work.recompute), ("compute", label, work.compute),
                ("tp_comm", "tp " + label, work.tp_comm)]
    weight = cost.backward_weight_s if direction == BACKWARD_INPUT else 0.0
    return [("recompute", "recompute " + label, cost.recompute_s - cost.recompute_tp_s),
            ("tp_comm", "tp recompute " + label, cost.recompute_tp_s),
            ("compute", label, cost.backward_compute_s - weight), ("tp_comm", "tp " + label, cost.backward_tp_s)]
