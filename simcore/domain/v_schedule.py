"""ZB-V's order, built as the Zero Bubble authors build it (Qi et al. 2024, section 6; sail-sg/zero-bubble-pipeline-
parallelism @39f2c18, megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py, `PipelineGraph.try_v_schedule`
and `create_schedule`, which the authors' runtime calls for `--zero-bubble-v-schedule`).

Rank r holds chunk 0 (virtual stage r, on the way down) and chunk 1 (virtual stage 2p - 1 - r, on the way up); the
loss is on rank 0. The passes are placed on a timeline in the authors' phases:
1. warm-up: a chunk-0 forward on every rank, then from the last rank up, each rank's first chunk-1 forward, with
   chunk-0 forwards of the ranks above it filling the time until that forward's input arrives (memory allowing);
2. the ranks below catch up: chunk-0 and chunk-1 forwards in turn until each rank has run as many as the one above;
3. steady state, 2m rounds of one input gradient (B) per rank, then one forward per rank: each rank takes the
   chunk-1 backward when its gradient is there, else the chunk-0 one; before a pass whose input is not there yet a
   deferred weight gradient (W) runs if it ends before the input arrives, and one more if the wait would make the
   rank's idle time exceed the largest any rank has (`fill_b`, `fill_f` say whether a chunk-0 backward and a
   forward may take that extra W);
4. the deferred W that remain.
The memory rule runs a deferred W before a pass that would exceed the limit: at most 2p chunk-microbatches between
their forward and their W per rank (each chunk half a stage: 1F1B's p stage-microbatches on its first rank). The
authors count bytes (a forward adds 34h + 5as, B frees 2h + 5as, W the rest); counting microbatches, as here, is
the same limit until 17 input gradients wait for their W, which these orders never reach, and never holds more.

The four fill choices are tried; each try is repeated with the previous try's idle per rank as the bubble it may
approve, while the largest idle falls; the order with the smallest largest idle wins. The authors place on one
T_F, T_B, T_W (each stage's average, the median across stages); here each virtual stage's own costs are used, with
free communication (the engine runs the transfers). Where the per-stage costs leave a phase without a pass it may
place, the order is built, as the authors build it, on the stages' median costs.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from statistics import median

from simcore.domain.passes import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, Pass

Costs = tuple[tuple[float, float, float], ...]  # per virtual stage: T_F, T_B (input gradient), T_W
F, B, W = 0, 1, 2  # the authors' pass categories
# (category, chunk) -> a slot of a rank's counts; B's chunk 0 is the backward of chunk 1 (the V's way back up)
_DIRECTION = (FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)
_MAX_TRIES = 64


class _Unplaceable(Exception):
    """A phase found no pass it may place on these costs."""


class _Try:
    """One `try_v_schedule`: the placement state and the placing rules."""

    def __init__(self, p: int, m: int, costs: Costs, limit: int, approved: list[float] | None) -> None:
        self.p, self.m, self.costs, self.limit = p, m, costs, limit
        self.count = [[0] * 6 for _ in range(p)]
        self.end: dict[tuple[int, int, int, int], float] = {}
        self.now = [0.0] * p
        self.held = [0] * p
        self.idle = [0.0] * p
        self.pending: list[deque[int]] = [deque() for _ in range(p)]
        self.order: list[list[tuple[int, int, int]]] = [[] for _ in range(p)]
        self.approved = approved or [-1.0] * p
        self.most_approved = max(self.approved)

    def cost(self, cat: int, chunk: int, stage: int) -> float:
        real = chunk if cat == F else 1 - chunk
        return self.costs[stage if real == 0 else 2 * self.p - 1 - stage][cat]

    def ended(self, cat: int, chunk: int, stage: int, mb: int) -> float | None:
        return self.end.get((cat, chunk, stage, mb))

    def most_idle(self, stage: int = -1) -> float:
        most = max(self.idle, default=0.0)
        if stage >= 0:
            most = max(most, self.most_approved - self.approved[stage])
        return most

    def put_w(self, stage: int) -> None:
        if not self.pending[stage]:
            raise _Unplaceable
        self.put(W, self.pending[stage].popleft(), stage)

    def put(self, cat: int, chunk: int, stage: int) -> None:
        n = self.count[stage][cat * 2 + chunk]
        if n >= self.m or self.held[stage] + (cat == F) > self.limit:
            raise _Unplaceable
        if cat == W:
            before = self.ended(B, chunk, stage, n)
        elif cat or chunk:
            before = self.ended(cat if chunk else F, 0 if chunk else 1, stage, n)
        else:
            before = 0.0
        cost = self.cost(cat, chunk, stage)
        end = unwaited = self.now[stage] + cost  # (summed as the authors sum them: the same ties)
        if cat < W and (stage < self.p - 1 if chunk else stage > 0):
            upstream = self.ended(cat, chunk, stage + 1 if chunk else stage - 1, n)
            if upstream is None:
                raise _Unplaceable
            end = max(end, upstream + cost)
        if before is None:
            raise _Unplaceable
        if self.count[stage][0] > 0:
            self.idle[stage] += end - unwaited
        self.end[(cat, chunk, stage, n)] = self.now[stage] = end
        self.held[stage] += 1 if cat == F else -1 if cat == W else 0
        self.order[stage].append((cat, chunk, n))
        if cat == B:
            self.pending[stage].append(chunk)
        self.count[stage][cat * 2 + chunk] += 1

    def fill(self, stage: int, waits_for: tuple[int, int, int, int] | None, extra: bool) -> None:
        """Deferred W before a pass that waits for `waits_for`: those that end before it arrives, and one more if
        the wait would leave the rank idle longer than the others (and `extra` allows it)."""
        arrives = self.end.get(waits_for) if waits_for is not None else None
        if arrives is None:
            return
        while self.pending[stage] and arrives >= self.now[stage] + self.cost(W, self.pending[stage][0], stage):
            self.put_w(stage)
        if self.pending[stage] and arrives - self.now[stage] > self.most_idle(stage) - self.idle[stage] and extra:
            self.put_w(stage)

    def warm_up(self) -> None:
        p, m, count = self.p, self.m, self.count
        for i in range(p):
            self.put(F, 0, i)
        for i in range(p - 1, -1, -1):
            if i < p - 1:
                arrives = self.end[(F, 1, i + 1, 0)]
                while (self.held[i] + 2 + 2 * i <= self.limit and self.now[i] + self.cost(F, 0, i) <= arrives
                       and count[i][0] < m):
                    for j in range(i + 1):
                        self.put(F, 0, j)
            self.put(F, 1, i)
        chunk, idle_rounds = 0, 0
        for i in range(1, p):
            while count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] or count[i][1] <= count[i - 1][1] < m:
                placed = [j for j in range(p - 1, i - 1, -1) if count[j][chunk] < m]
                for j in placed:
                    self.put(F, chunk, j)
                idle_rounds = 0 if placed else idle_rounds + 1
                if idle_rounds > 1:  # neither chunk has a forward left to place
                    raise _Unplaceable
                chunk = 1 - chunk

    def steady(self, fill_f: bool, fill_b: bool) -> None:
        p, m, count = self.p, self.m, self.count
        for _ in range(2 * m):
            ranks: list[tuple[int, int]] = []
            ups = [i for i in range(p) if count[i][3] < count[i][2] and (
                i == p - 1 or (B, 1, i + 1, count[i][3]) in self.end or count[i][2] >= m)]
            ranks += [(i, 1) for i in reversed(ups)]
            ranks += [(i, 0) for i in range(p) if i not in ups]
            for i, chunk in ranks:
                waits = ((B, 1, i + 1, count[i][3]) if chunk == 1 and i < p - 1 else
                         (B, 0, i - 1, count[i][2]) if chunk == 0 and i > 0 else None)
                self.fill(i, waits, chunk == 1 or fill_b)
                self.put(B, chunk, i)
            for i in range(p):
                if count[i][1] >= m:
                    continue
                chunk_: int | None = None
                if count[i][1] >= count[i][0]:
                    chunk_ = 0
                elif i == p - 1 or (F, 1, i + 1, count[i][1]) in self.end:
                    chunk_ = 1
                elif count[i][0] < m and (i == 0 or (F, 0, i - 1, count[i][0]) in self.end):
                    chunk_ = 0
                if chunk_ is None:
                    continue
                while self.held[i] + 1 > self.limit:
                    self.put_w(i)
                waits = ((F, 0, i - 1, count[i][0]) if chunk_ == 0 and i > 0 else
                         (F, 1, i + 1, count[i][1]) if chunk_ == 1 and i < p - 1 else None)
                self.fill(i, waits, fill_f)
                self.put(F, chunk_, i)
        for i in range(p):
            while self.pending[i]:
                self.put_w(i)


def _best(p: int, m: int, costs: Costs, limit: int) -> list[list[tuple[int, int, int]]]:
    best: tuple[float, list[list[tuple[int, int, int]]]] | None = None
    for fill_b in (True, False):
        for fill_f in (True, False):
            approved: list[float] | None = None
            for _ in range(_MAX_TRIES):  # each try approves the previous one's idle per rank, while the largest
                # idle falls (the authors recurse without a bound; their chains end after a few tries)
                t = _Try(p, m, costs, limit, approved)
                t.warm_up()
                t.steady(fill_f, fill_b)
                worst = t.most_idle()
                if best is None or worst < best[0]:
                    best = (worst, t.order)
                if approved is not None and worst >= max(approved):
                    break
                approved = t.idle
    assert best is not None
    return best[1]


@lru_cache(maxsize=256)
def v_orders(p: int, m: int, costs: Costs | None = None) -> tuple[tuple[Pass, ...], ...]:
    """Every rank's ZB-V passes for m microbatches, placed on `costs` (per virtual stage 0 .. 2p - 1: T_F, T_B,
    T_W in seconds; equal when None)."""
    cost = costs or ((1.0, 1.0, 1.0),) * (2 * p)
    limit = 2 * p
    try:
        placed = _best(p, m, cost, limit)
    except _Unplaceable:
        f, b, w = (median(c[k] for c in cost) for k in range(3))
        placed = _best(p, m, ((f, b, w),) * (2 * p), limit)
    return tuple(tuple(Pass(_DIRECTION[cat], mb, chunk if cat == F else 1 - chunk) for cat, chunk, mb in order)
                 for order in placed)
