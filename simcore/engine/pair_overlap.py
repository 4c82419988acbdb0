"""DualPipe's overlapped pair on a mixture-of-experts model: a forward chunk and another microbatch's backward
chunk on one GPU, each one's all-to-alls hidden under the other's kernels (DeepSeek-V3 report, section 3.2.1,
Figure 4; deepseek-ai/DualPipe's `overlapped_forward_backward` hook, which the model supplies).

Each half is a chain of pieces that alternate between compute (kernels) and communication (the all-to-alls and
the tensor-parallel collectives beside them), MoE layer after MoE layer, in the order the layer runs them:
- forward: the chunk's other kernels (embedding, dense layers, logits), then for each MoE layer its attention
  side (attention, router, permutation), the dispatch, its expert side (experts, unpermutation, shared
  experts), the combine;
- backward: for each MoE layer (with full recomputation, first its forward again: attention side, dispatch,
  expert side, combine) the combine's gradient, the expert side's input gradient (B), the dispatch's gradient,
  the attention side's B; then the chunk's other backward kernels. Each side's weight gradients (W) are
  deferred: they need nothing after their B and nothing waits for them, so they run on the compute stream
  when no chained piece is ready there (the report's Figure 4 runs the MLP's W beside the dispatch's gradient),
  and all of them before the pair ends.
The chunk's times are split evenly over its MoE layers; the all-to-all time of a layer is half dispatch, half
combine, with the pass's tensor-parallel time shared among them the same way.

The GPU runs the pieces of both halves on two streams: one for compute and one for communication (DeepSeek-V3
gives 20 of an H800's 132 SMs to communication, where the all-to-alls of both halves run one at a time). A piece
starts when the piece before it in its half has ended and its stream is free; when both halves have one ready
for a free stream, the one that has waited longer goes first (the backward half on a tie: its input gradient
is what the previous stage waits for). While a communication piece is in flight, the compute beside it runs
slower by its chunk's `ep_slowdown` (its channels' SMs and HBM traffic, simcore/cost/comm/interference.py). The pair
ends when both halves have. So an all-to-all shorter than the other half's compute beside it is hidden, and a
longer one shows its excess on the timeline.

"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from simcore.cost.chunk import ChunkCost

Piece = tuple[int, float]  # (kind, seconds)
COMPUTE, COMM, WEIGHT = 0, 1, 2  # kernels, communication, deferred weight gradients
FORWARD_HALF, BACKWARD_HALF = 0, 1


@dataclass(frozen=True, slots=True)
class PairTiming:
    duration: float
    kernels: float  # compute at full speed, both halves
    slowed: float  # what interference added to the compute
    communication: float  # the communication pieces' time, both halves (hidden or not)

    @property
    def exposed(self) -> float:
        """Time in which the pair's GPU ran communication and no compute."""
        return max(0.0, self.duration - self.kernels - self.slowed)


def _chain(pieces: list[Piece]) -> list[Piece]:
    """The pieces without empty ones, consecutive pieces of one kind merged."""
    out: list[Piece] = []
    for kind, seconds in pieces:
        if seconds <= 0:
            continue
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + seconds)
        else:
            out.append((kind, seconds))
    return out


def forward_pieces(cost: ChunkCost) -> list[Piece]:
    n = cost.moe_layers
    if n == 0:
        return _chain([(COMPUTE, cost.forward_compute_s), (COMM, cost.forward_tp_s + cost.forward_ep_s)])
    attention, experts = cost.moe_forward_s
    one = (cost.forward_ep_s + cost.forward_tp_s) / (2 * n)  # a dispatch or a combine
    layer = [(COMPUTE, attention / n), (COMM, one), (COMPUTE, experts / n), (COMM, one)]
    return _chain([(COMPUTE, cost.forward_compute_s - attention - experts), *(layer * n)])


def backward_pieces(cost: ChunkCost) -> list[Piece]:
    n = cost.moe_layers
    kernels = cost.recompute_s - cost.recompute_tp_s - cost.recompute_ep_s
    recompute_comm = cost.recompute_tp_s + cost.recompute_ep_s
    if n == 0:
        return _chain([(COMPUTE, kernels), (COMM, recompute_comm), (COMPUTE, cost.backward_compute_s),
                       (COMM, cost.backward_tp_s + cost.backward_ep_s)])
    forward_attention, forward_experts = cost.moe_forward_s
    share = forward_attention / (forward_attention + forward_experts) if forward_attention > 0 else 0.0
    attention, experts = cost.moe_backward_s
    attention_w, experts_w = cost.moe_weight_s
    one = (cost.backward_ep_s + cost.backward_tp_s) / (2 * n)
    again = recompute_comm / (2 * n)
    layer = [(COMPUTE, kernels / n * share), (COMM, again), (COMPUTE, kernels / n * (1 - share)), (COMM, again),
             (COMM, one), (COMPUTE, (experts - experts_w) / n), (WEIGHT, experts_w / n), (COMM, one),
             (COMPUTE, (attention - attention_w) / n), (WEIGHT, attention_w / n)]
    return _chain([*(layer * n), (COMPUTE, cost.backward_compute_s - attention - experts)])


def overlap(halves: tuple[list[Piece], list[Piece]], slowdowns: tuple[float, float]) -> PairTiming:
    """Run the two halves' pieces (forward half first) on the compute and communication streams; `slowdowns`:
    each half's compute slowdown factor beside its own communication."""
    following = [0, 0]  # each half's next piece
    ready = [0.0, 0.0]  # when each half's previous piece ended
    deferred: deque[float] = deque()  # weight gradients whose B has run
    now = slowed = 0.0
    compute: list[float] | None = None  # [half (-1: a deferred W), work left at full speed]
    comm: tuple[int, float] | None = None  # (half, end)

    def advance(h: int) -> None:  # a half's W pieces at its head go to the deferred ones
        while following[h] < len(halves[h]) and halves[h][following[h]][0] == WEIGHT:
            deferred.append(halves[h][following[h]][1])
            following[h] += 1

    advance(FORWARD_HALF)
    advance(BACKWARD_HALF)
    while True:
        busy = {int(compute[0]) if compute else -1, comm[0] if comm else -1}
        for stream in (COMPUTE, COMM):
            if (compute if stream == COMPUTE else comm) is not None:
                continue
            waiting = [h for h in (BACKWARD_HALF, FORWARD_HALF) if h not in busy
                       and following[h] < len(halves[h]) and halves[h][following[h]][0] == stream]
            if not waiting:
                if stream == COMPUTE and deferred:
                    compute = [-1.0, deferred.popleft()]
                continue
            h = min(waiting, key=lambda half: ready[half])
            busy.add(h)
            seconds = halves[h][following[h]][1]
            if stream == COMPUTE:
                compute = [float(h), seconds]
            else:
                comm = (h, now + seconds)
        if compute is None and comm is None:
            break
        factor = slowdowns[comm[0]] if comm is not None else 1.0
        compute_end = now + compute[1] * factor if compute is not None else float("inf")
        comm_end = comm[1] if comm is not None else float("inf")
        t = min(compute_end, comm_end)
        if compute is not None:
            if t == compute_end:
                slowed += compute[1] * (factor - 1.0)
                h = int(compute[0])
                if h >= 0:
                    following[h] += 1
                    ready[h] = t
                    advance(h)
                compute = None
            else:
                done = (t - now) / factor
                slowed += (t - now) - done
                compute[1] -= done
        if comm is not None and t == comm_end:
            following[comm[0]] += 1
            ready[comm[0]] = t
            advance(comm[0])
            comm = None
        now = t
    kernels = sum(s for half in halves for kind, s in half if kind != COMM)
    communication = sum(s for half in halves for kind, s in half if kind == COMM)
    return PairTiming(now, kernels, slowed, communication)


def pair_timing(forward: ChunkCost, backward: ChunkCost) -> PairTiming:
    """The overlapped pair of a forward pass of `forward` and a backward pass of `backward`."""
    return overlap((forward_pieces(forward), backward_pieces(backward)), (forward.ep_slowdown, backward.ep_slowdown))
