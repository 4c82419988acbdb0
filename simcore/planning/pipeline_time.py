"""The fill and drain of a pipeline whose stages differ, in closed form: what the search's estimate
(simcore.planning.estimate) adds to m times the slowest stage (no I/O).

With equal stages it is Narayanan et al.'s (p-1)/v stage times (2021, §2.2). With unequal ones (the first stage
also embeds, the last computes the logits, a split with a remainder gives some stages a layer more), (p-1) times
the slowest stage overstates it: under 1F1B a faster stage downstream of the slowest returns its gradients before
the slowest needs them, so part of its work hides. The closed form follows the schedule's order
(simcore.domain.schedules: pp - rank - 1 warm-up forwards, then a forward and a backward in turn) backwards from
the last rank, rank k's last backward ending at the latest of:
- the last backward of rank k+1, then its own (every gradient comes from downstream);
- its first backward (after its warm-up forwards and the first gradient's return), then its other passes;
- with a steady phase: the forwards reaching it, m forward-backward pairs, and what the rest of the pipeline
  adds beyond its warm-up forwards (waiting for the first gradient) and beyond its cool-down backwards (for the
  last).
The first rank's last backward ends the iteration. Against the schedule run pass by pass (tests/simcore/planning/
test_pipeline_time.py) it is never longer and at most 3% shorter. GPipe runs every forward, then every backward:
two flow shops, sum + (m-1) x the slowest. With v model chunks a rank the fill and drain pass through chunks a
v-th the size (Narayanan's /v); Zero Bubble and DualPipe leave a share of 1F1B's (their papers' tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from simcore.domain.layout import Schedule

# The bubble of the schedules past 1F1B as a share of 1F1B's, with T_F = T_B = T_W (the Zero Bubble README's
# table: ZB-H1 a third, ZB-H2 and ZB-V none; DualPipe (pp/2 - 1)(F&B + B - 3W) over 1F1B's (pp - 1)(F + B),
# about a sixth). For ordering only: the simulator runs each schedule as events.
BUBBLE_SHARE = {Schedule.ZB_H1: 1 / 3, Schedule.ZB_H2: 0.0, Schedule.ZB_V: 0.0, Schedule.DUALPIPE: 1 / 6}


def one_f_one_b_s(forward: Sequence[float], backward: Sequence[float], m: int) -> float:
    """Seconds of m microbatches of 1F1B over stages whose passes take `forward[r]` and `backward[r]` (no
    communication): the closed form of the module's docstring."""
    p = len(forward)
    reach = [0.0, *accumulate(forward)]  # reach[k]: the forwards of the ranks before k
    slowest = list(accumulate(forward, max))  # slowest[k]: the slowest forward up to rank k
    after = 0.0  # the work of the ranks after k (forward + backward)
    last = first = 0.0  # rank k+1's last backward's end, and its first backward's
    for k in range(p - 1, -1, -1):
        f, b = forward[k], backward[k]
        warmup = min(p - 1 - k, m)
        ready = reach[k + 1] + (min(warmup + 1, m) - 1) * slowest[k]  # its forwards before its first backward
        first = max(first, ready) + b
        end = max(last + b, first + (m - 1) * b + max(0, m - warmup - 1) * f)
        if warmup < m:  # a steady phase
            end = max(end, reach[k] + m * (f + b) + max(0.0, after - warmup * f) + max(0.0, after - warmup * b))
        last = end
        after += f + b
    return last


def fill_drain_s(stages: Sequence[float], forward_share: float, m: int, v: int, schedule: Schedule) -> float:
    """Seconds a pipeline of `stages` (each one's seconds a microbatch, forward and backward; `forward_share` of
    it the forward) adds to m times its slowest stage, under `schedule` with v model chunks a rank."""
    slowest = max(stages)
    if schedule is Schedule.GPIPE:
        return sum(stages) - slowest
    whole = one_f_one_b_s([forward_share * s for s in stages], [(1 - forward_share) * s for s in stages], m)
    return max(0.0, whole - m * slowest) / v * BUBBLE_SHARE.get(schedule, 1.0)
