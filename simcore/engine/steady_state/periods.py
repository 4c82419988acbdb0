"""The schedule's pass lists, for simcore/engine/steady_state/periodic.py: where a rank's passes repeat period after
period (the steady stretch), how many periods an iteration may leave out, the lists of the smaller iteration, and
whether a rank's full list is its reduced one with the periods put back at a cut.

A period moves every microbatch label `q` on; on pipeline rank r it holds L_r passes (the rank's passes per
microbatch times q, rounded down or up: a rank may split a few backward passes in two). The stretch is the longest
run of passes each of which recurs L_r places and q labels later. Nothing here names a schedule: a schedule
whose lists have no long stretch (GPipe's backward phase runs its microbatches in reverse, so its lists are not
one stretch with a prefix and a suffix) is simulated in full.

What the smaller iteration's stretch keeps, on its shortest rank (the rest is left out):
- 2K periods, the K before the cut and the K after it, which the check compares; the K before are also what
  shows that the rank has settled (no separate settling periods).
- One period for the fill: the stretch's first period starts behind the warm-up's last passes and is longer than
  the others (by up to a fifth on interleaved 1F1B at pp 32, GPT-3 175B).
- One period for the ranks' phases: the cut is fixed when the last rank has settled, at each rank's latest period
  start, so the cuts lie within a period of each other, and each rank's stretch goes on for a period after its
  checked ones: the ranks whose cuts came later are checked over it, and see this rank through the events,
  pending calls and flows they count.
- At least MIN_KEPT_PASSES passes: a short period (1F1B's and ZB-H1's 2 passes) settles over several, and a few
  more of them cost little (ZB-H1 and DualPipe at pp 8 need 8 to 10 periods of 2 passes).
- A period of fewer than FULL_EVERY passes keeps K + 1 more: its starts are timed alone until every rank's
  times are paced, and only then taken in full (the K before the cut and the K after), since taking one costs
  about what a few passes do and the last stages of a deep pipeline are paced long before its first (the 1T
  example's 64 stages: taking every other pass's start in full made its run half again as long).
A try that fails because the pipeline had not settled is run again keeping more (`keep`). Interleaved 1F1B's
period is pp microbatches (2 v pp passes a rank), and its stretch holds about m/pp - 2 of them: at m/pp = 12 ten,
of which four are left out; at m/pp of 8 or less nothing can be (its stretch is too short for the check).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import and_, eq, itemgetter, mul, sub

from simcore.domain.schedules import COSTED, POLICIES, Pass
from simcore.engine.pipeline import EngineConfig

K_SIDE = 2  # periods checked on each side of the cut
FILL_AND_PHASE = 2  # periods kept beyond the 2K checked: one for the fill, one after, for the ranks' phases
MIN_KEPT_PASSES = 20  # on the shortest stretch's rank: a short period settles over several
# Passes a period from which each period start of a rank's stretch is taken in full (the K that show it settled
# are then the K checked before its cut); a shorter period's starts are timed alone until every rank is paced
# (simcore/engine/steady_state/periodic.py's Watch).
FULL_EVERY = 8
MIN_SAVED_PASSES = 16  # on each rank: fewer passes to leave out are not worth the check


@dataclass(frozen=True, slots=True)
class Cut:
    """N periods (of q microbatches, L_r passes on pipeline rank r) to cut out of each rank's list, and the
    reduced lists with their steady stretches [a_r, b_r) (b_r: the index after the last whole period)."""

    periods: int  # N
    q: int  # how far a period moves a microbatch label on
    microbatches: int  # m', what is simulated
    lengths: tuple[int, ...]  # L_r
    stretches: tuple[tuple[int, int], ...]
    passes: tuple[list[Pass], ...]  # the reduced lists
    columns: tuple[Columns, ...]  # the reduced lists'
    full_columns: tuple[Columns, ...]  # the full lists'


class Columns:
    """A rank's list as columns, to compare passes at C speed: (direction, chunk, backward chunk), the
    microbatches, the backward microbatches (-1: none), both as one number (microbatch x 2^32 + backward
    microbatch) and what one microbatch later adds to that number."""

    __slots__ = ("kinds", "microbatches", "backward", "labels", "units")

    def __init__(self, order: list[Pass]) -> None:
        # Passes are interned (a long pipeline's lists repeat a thousand passes 10^5 times): each distinct pass's
        # row is made once, and the columns gathered from the rows by id in C.
        ids = list(map(id, order))
        rows = _ROWS[0]
        missing = set(ids).difference(rows)
        if missing:
            if len(rows) + len(missing) > _MOST_ROWS:  # a new table (one in use elsewhere stays whole)
                rows = _ROWS[0] = {}
                missing = set(ids)
            for p in dict(zip(ids, order)).values():
                if id(p) in missing:
                    b = p.backward_microbatch
                    rows[id(p)] = ((p.direction, p.chunk, p.backward_chunk), p.microbatch, b,
                                   p.microbatch * _WIDE + max(b, 0), _WIDE + 1 if b >= 0 else _WIDE, p)
        picked = list(map(rows.__getitem__, ids))
        self.kinds, self.microbatches, self.backward, self.labels, self.units = (
            list(map(itemgetter(k), picked)) for k in range(5))


_WIDE = 1 << 32
# id(pass) -> its row: kind, microbatch, backward microbatch, label, unit, and the pass itself (kept, so that its id
# is not reused while the row is here)
_ROWS: list[dict[int, tuple[tuple[str, int, int], int, int, int, int, Pass]]] = [{}]
_MOST_ROWS = 1 << 18
_RUN = re.compile(b"\x01+")
# The smaller iterations' lists and every list's columns, shared by the runs of one process (a search asks for the
# same schedule shapes again and again): (schedule, rank, pp, m, chunks, costs) -> a rank's list; id(list) -> the
# list (kept, so that its id is not reused while it is here) and its columns.
_MOST_LISTS = 256
_LISTS: dict[tuple[object, ...], list[Pass]] = {}
_COLUMNS: dict[int, tuple[list[Pass], Columns]] = {}


def columns_of(order: list[Pass]) -> Columns:
    """A list's columns (the list must not change afterwards: lists are shared)."""
    hit = _COLUMNS.get(id(order))
    if hit is None or hit[0] is not order:
        if len(_COLUMNS) >= _MOST_LISTS:
            _COLUMNS.clear()
        hit = _COLUMNS[id(order)] = (order, Columns(order))
    return hit[1]


def stretch(cols: Columns, q: int, length: int) -> tuple[int, int]:
    """The longest run of whole periods [a, b) whose every pass repeats L places and q microbatches later (the
    last period's passes are the repeats)."""
    kinds, labels = cols.kinds, cols.labels
    # per pass: the same kind L places on, a label q units on (in C: a long pipeline's lists hold 10^5 passes)
    ok = bytes(map(and_, map(eq, kinds, kinds[length:]),
                   map(eq, map(sub, labels[length:], labels), map(mul, repeat(q), cols.units))))
    a, b = max(((r.start(), r.end()) for r in _RUN.finditer(ok)), key=lambda r: r[1] - r[0], default=(0, 0))
    whole = (b + length - a) // length * length if b > a else 0
    return a, a + whole


def _period(cols: Columns, q: int, m: int, periods: int = 0) -> tuple[int, tuple[int, int]]:
    """A rank's passes per period of q microbatch labels (its passes per microbatch times q, rounded down or up:
    a rank may split a few backward passes in two, whichever repeats longer), and its stretch; with `periods`,
    a stretch shorter than that may be given as none (without reading the whole list)."""
    size = len(cols.kinds)
    low = size * q // m
    best: tuple[int, tuple[int, int]] = (1, (0, 0))
    for n in (low,) if size * q % m == 0 else (low, low + 1):
        if n and (periods < 2 or _may_hold(cols, q, n, (periods - 1) * n)):
            found = stretch(cols, q, n)
            if found[1] - found[0] > best[1][1] - best[1][0]:
                best = (n, found)
    return best


def _may_hold(cols: Columns, q: int, length: int, run: int) -> bool:
    """Whether the list may hold `run` passes in a row each of which recurs `length` places and q labels later:
    such a run covers a multiple of `run`, so at least one of those passes does."""
    kinds, labels, units = cols.kinds, cols.labels, cols.units
    return any(kinds[j] == kinds[j + length] and labels[j + length] - labels[j] == q * units[j]
               for j in range(0, len(kinds) - length, run))


def schedule_lists(config: EngineConfig, m: int) -> tuple[list[Pass], ...]:
    """Each pipeline rank's passes for m microbatches (shared lists: not to be changed)."""
    layout = config.layout
    schedule, p, v = layout.schedule, layout.pp, layout.shape.chunks
    costs = None
    if schedule in COSTED:
        costs = tuple((c.forward_s, c.backward_input_s, c.backward_weight_s) for c in config.workload.chunks)
    out = []
    for rank in range(p):
        key = (schedule, rank, p, m, v, costs)
        order = _LISTS.get(key)
        if order is None:
            if len(_LISTS) >= _MOST_LISTS:
                _LISTS.clear()
            order = _LISTS[key] = POLICIES[schedule].passes(rank, p, m, v, costs)
        out.append(order)
    return tuple(out)


def aligned(full: Columns, reduced: Columns, cut: int, n: int, q: int, length: int,
            labels: dict[int, set[int]]) -> bool:
    """`reduced` is `full` with n periods cut out before index `cut`: the same passes before and after them up to
    their microbatch labels, the periods cut out repeating `full`'s period before them q microbatches later.
    Each reduced label's full labels are added to `labels` (a schedule may number microbatches from m, so a label
    may differ by more than the n q cut out)."""
    end = cut + n * length
    if len(full.kinds) != len(reduced.kinds) + n * length or cut < length:
        return False
    kinds, values = full.kinds, full.labels
    if kinds[cut:end] != kinds[cut - length:end - length] or \
            [y - x for x, y in zip(values[cut - length:end - length], values[cut:end])] != \
            [q * u for u in full.units[cut:end]]:
        return False
    if kinds[:cut] + kinds[end:] != reduced.kinds:
        return False
    for mine, theirs in ((reduced.microbatches, full.microbatches), (reduced.backward, full.backward)):
        for small, large in set(zip(mine, theirs[:cut] + theirs[end:])):
            if small >= 0:
                labels.setdefault(small, set()).add(large)
    return True


def consistent(labels: dict[int, set[int]], shift: int) -> bool:
    """Every rank relabels a microbatch alike, or, across a cut, `shift` (n q) later (what the check of the
    periods on both sides of the cuts vouches for); no two microbatches become one."""
    seen: set[int] = set()
    for full in labels.values():
        if len(full) > 2 or (len(full) == 2 and max(full) - min(full) != shift) or seen & full:
            return False
        seen |= full
    return True


def kept_periods(keep: int, length: int, lead: int) -> int:
    """The periods of its stretch that the smaller iteration keeps on its shortest rank (L = `length` passes a
    period): 2K + FILL_AND_PHASE, and at least MIN_KEPT_PASSES passes; a later try (`keep` > 1) also keeps
    (keep - 1) x (K + 1) more, and from the third on the lead (the latest stretch's start, in periods), for a
    pipeline that settles late."""
    kept = max(2 * K_SIDE + FILL_AND_PHASE, -(-MIN_KEPT_PASSES // length)) + (keep - 1) * (K_SIDE + 1)
    if length < FULL_EVERY:  # a short period's starts are timed until every rank is paced: K + 1 more
        kept += K_SIDE + 1
    return kept + lead if keep > 2 else kept


def plan_cut(config: EngineConfig, full: Sequence[list[Pass]], keep: int) -> Cut | str:
    """Where to cut (`keep` 1: as much as may be; more: leaving the pipeline longer to settle), or why nothing is:
    the lists have no steady stretch long enough to gain from it.

    A period moves each label `shift` on and holds q microbatches: q = shift, or 2 shift where a schedule runs two
    streams of microbatches at once (DualPipe's two directions, each numbered on its own)."""
    m = config.layout.num_microbatches
    columns = [columns_of(order) for order in full]
    floor = 2 * K_SIDE + FILL_AND_PHASE + 1  # periods a stretch needs: those kept and one to leave out
    reason = ""
    for shift in range(1, m // floor + 1):
        lengths, stretches = [], []
        for cols in columns:  # the first rank whose stretch is too short ends the try
            n, (a, b) = _period(cols, shift, m, floor)
            if (b - a) // n < floor:
                break
            lengths.append(n)
            stretches.append((a, b))
        else:
            periods = min((b - a) // n for (a, b), n in zip(stretches, lengths, strict=True))
            lead = max(-(-a // n) for (a, _b), n in zip(stretches, lengths, strict=True))
            kept = kept_periods(keep, min(lengths), lead)
            n_cut = periods - kept
            if n_cut < 1 or n_cut * min(lengths) < MIN_SAVED_PASSES:
                reason = reason or (f"a steady stretch of {periods} periods of {shift} microbatch labels, less the "
                                    f"{kept} the check keeps, leaves fewer than {MIN_SAVED_PASSES} passes a rank "
                                    "to leave out")
                continue
            for q in (shift, 2 * shift):
                if m - n_cut * q < 1 or (keep > 1 and 4 * (m - n_cut * q) > 3 * m):
                    reason = reason or (f"keeping {kept} periods of {shift} microbatch labels to settle, the "
                                        f"smaller iteration would simulate more than 3/4 of the {m} microbatches")
                    continue
                reduced = schedule_lists(config, m - n_cut * q)
                if all(len(a) == len(b) + n_cut * n for a, b, n in zip(full, reduced, lengths, strict=True)):
                    small_columns = tuple(columns_of(order) for order in reduced)
                    small = tuple(stretch(cols, shift, n) for cols, n in zip(small_columns, lengths, strict=True))
                    return Cut(n_cut, shift, m - n_cut * q, tuple(lengths), small, reduced, small_columns,
                               tuple(columns))
    if reason:
        return reason
    longest = max((((b - a) // n, shift) for shift in range(1, m // 2 + 1)
                   for n, (a, b) in (_period(columns[0], shift, m, 2),)), default=(0, 0))
    return (f"no steady stretch of {floor} periods or more in the schedule's pass lists (2K = {2 * K_SIDE} checked "
            f"around the cut, {FILL_AND_PHASE} more to settle, one to leave out)" +
            (f"; pipeline rank 0's longest holds {longest[0]} periods of {longest[1]} microbatch labels"
             if longest[0] > 1 else ""))
