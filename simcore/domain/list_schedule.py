"""Zero-bubble orders built by list scheduling, as the Zero Bubble authors build theirs (Qi et al. 2024, section 3.1 and
its automatic scheduler, sail-sg/zero-bubble-pipeline-parallelism megatron/core/pipeline_parallel/
zerobubble/scheduler/zb.py; ZB-H2 uses it, ZB-V the authors' V scheduler, simcore/domain/v_schedule.py): the passes
of every rank are placed on a timeline one by one, each rank taking, when it is free, the pass that can start first,
and on a tie the input gradient I (the previous stage waits for it), then a forward pass F if the rank's memory limit
allows one more microbatch in flight, then a deferred weight gradient W (nobody waits for it: it fills what would be
idle time).

The timeline is built on each virtual stage's T_F, T_B and T_W as the cost model gives them (the authors' scheduler
profiles them), with free communication, or on the papers' equal costs when none are given; the engine then runs the
order over the real network, where transfers and anything the costs missed show up as waiting.
"""

from __future__ import annotations

import heapq
from collections import deque
from functools import lru_cache

from simcore.domain.passes import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, Pass
from simcore.domain.pipeline_shape import PipelineShape

# Priorities on a tie: the input gradient, then a forward pass, then a weight gradient.
_PRIORITY = {BACKWARD_INPUT: 0, FORWARD: 1, BACKWARD_WEIGHT: 2}
_COST_INDEX = {FORWARD: 0, BACKWARD_INPUT: 1, BACKWARD_WEIGHT: 2}


Costs = tuple[tuple[float, float, float], ...]  # per virtual stage: T_F, T_B (input gradient), T_W


@lru_cache(maxsize=256)
def list_orders(shape: PipelineShape, m: int, limit: int, costs: Costs | None = None) -> tuple[tuple[Pass, ...], ...]:
    """Every rank's passes for m microbatches through the shape's single chain of virtual stages, at most `limit`
    microbatch-chunks in flight per rank (a forward pass adds one until its W has run); `costs` per virtual stage
    (seconds), equal when None."""
    cost = costs or ((1.0, 1.0, 1.0),) * shape.virtual_stages
    p, last = shape.pp, shape.virtual_stages - 1
    stages = [[shape.stage(r, c) for c in range(shape.chunks)] for r in range(p)]
    next_f = [0] * shape.virtual_stages
    next_i = [0] * shape.virtual_stages
    end_f: dict[tuple[int, int], float] = {}
    end_i: dict[tuple[int, int], float] = {}
    pending: list[deque[tuple[int, int]]] = [deque() for _ in range(p)]
    held = [0] * p
    clock = [0.0] * p
    orders: list[list[Pass]] = [[] for _ in range(p)]
    left = 3 * m * shape.virtual_stages

    def choice(r: int) -> tuple[float, int, int, int, str] | None:
        """(start, priority, tie-break, virtual stage, direction) of the rank's best next pass, if any."""
        best = None
        for vs in stages[r]:
            mb = next_i[vs]
            if mb < next_f[vs] and (vs == last or (vs + 1, mb) in end_i):
                ready = max(end_f[(vs, mb)], end_i[(vs + 1, mb)] if vs < last else 0.0)
                # among input gradients the one furthest down the backward chain first (it frees memory sooner)
                cand = (max(clock[r], ready), _PRIORITY[BACKWARD_INPUT], vs, vs, BACKWARD_INPUT)
                best = cand if best is None or cand < best else best
            mb = next_f[vs]
            # A microbatch entering the rank's first chunk leaves room for one in flight to go on to a later
            # chunk (else a rank full of first-chunk forwards may never reach the loss).
            room = limit - (shape.chunks - 1 if vs == stages[r][0] else 0)
            if mb < m and held[r] < room and (vs == 0 or (vs - 1, mb) in end_f):
                ready = end_f[(vs - 1, mb)] if vs > 0 else 0.0
                # among forward passes the one furthest along the chain first (it reaches the loss sooner)
                cand = (max(clock[r], ready), _PRIORITY[FORWARD], -vs, vs, FORWARD)
                best = cand if best is None or cand < best else best
        if pending[r]:
            vs = pending[r][0][0]
            cand = (clock[r], _PRIORITY[BACKWARD_WEIGHT], 0, vs, BACKWARD_WEIGHT)
            best = cand if best is None or cand < best else best
        return best

    # Each rank's best next pass, recomputed only for the ranks a placement can change: the rank itself and
    # the ranks of the neighbouring virtual stages (an activation or a gradient they were waiting for).
    # A heap of (choice, rank, version): an entry whose version is not its rank's latest is stale.
    version = [0] * p
    heap = [(c, r, 0) for r in range(p) if (c := choice(r)) is not None]
    heapq.heapify(heap)
    while left:
        assert heap, "the list schedule cannot place its remaining passes"
        (start, _prio, _tie, vs, direction), r, seen = heapq.heappop(heap)
        if seen != version[r]:
            continue
        if direction == BACKWARD_WEIGHT:
            vs = pending[r][0][0]
        end = start + cost[vs][_COST_INDEX[direction]]
        clock[r] = end
        chunk = shape.chunk(vs)
        if direction == FORWARD:
            mb = next_f[vs]
            next_f[vs] += 1
            end_f[(vs, mb)] = end
            held[r] += 1
        elif direction == BACKWARD_INPUT:
            mb = next_i[vs]
            next_i[vs] += 1
            end_i[(vs, mb)] = end
            pending[r].append((vs, mb))
        else:
            vs, mb = pending[r].popleft()
            held[r] -= 1
        orders[r].append(Pass(direction, mb, chunk))
        left -= 1
        for other in {r, shape.rank(min(vs + 1, last)), shape.rank(max(vs - 1, 0))}:
            version[other] += 1
            if (c := choice(other)) is not None:
                heapq.heappush(heap, (c, other, version[other]))
    return tuple(tuple(order) for order in orders)
