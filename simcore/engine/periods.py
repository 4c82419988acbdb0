"""The schedule's pass lists, for simcore/engine/periodic.py: where a rank's passes repeat period after period
(the steady stretch), how many periods an iteration may leave out, the lists of the smaller iteration, and
whether a rank's full list is its reduced one with the periods put back at a cut.

A period moves every microbatch label `q` on; on pipeline rank r it holds L_r passes (the rank's passes per
microbatch times q, rounded down or up: a rank may split a few backward passes in two). The stretch is the longest
run of passes each of which recurs L_r places and q labels later. Nothing here names a schedule: a schedule
whose lists have no long stretch (GPipe's backward phase runs its microbatches in reverse, so its lists are not
one stretch with a prefix and a suffix) is simulated in full.
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
MIN_PERIODS = 8  # fewer periods to leave out are not worth the check


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


def _period(cols: Columns, q: int, m: int) -> tuple[int, tuple[int, int]]:
    """A rank's passes per period of q microbatch labels (its passes per microbatch times q, rounded down or up:
    a rank may split a few backward passes in two, whichever repeats longer), and its stretch."""
    size = len(cols.kinds)
    low = size * q // m
    best: tuple[int, tuple[int, int]] = (1, (0, 0))
    for n in (low,) if size * q % m == 0 else (low, low + 1):
        if n:
            found = stretch(cols, q, n)
            if found[1] - found[0] > best[1][1] - best[1][0]:
                best = (n, found)
    return best


def schedule_lists(config: EngineConfig, m: int) -> tuple[list[Pass], ...]:
    layout = config.layout
    schedule, p, v = layout.schedule, layout.pp, layout.shape.chunks
    costs = None
    if schedule in COSTED:
        costs = tuple((c.forward_s, c.backward_input_s, c.backward_weight_s) for c in config.workload.chunks)
    return tuple(POLICIES[schedule].passes(rank, p, m, v, costs) for rank in range(p))


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


def plan_cut(config: EngineConfig, full: Sequence[list[Pass]], keep: int) -> Cut | None:
    """Where to cut (`keep` 1: as much as may be; 2: leaving the pipeline longer to settle), or None when the
    lists have no steady stretch long enough to gain from it.

    A period moves each label `shift` on and holds q microbatches: q = shift, or 2 shift where a schedule runs two
    streams of microbatches at once (DualPipe's two directions, each numbered on its own)."""
    m = config.layout.num_microbatches
    columns = [Columns(order) for order in full]
    needed = MIN_PERIODS + keep * (K_SIDE + 1) + 2 * K_SIDE + 3  # periods, before the lead
    for shift in range(1, m // needed + 1):
        lengths, stretches = [], []
        for cols in columns:  # the first rank whose stretch is too short ends the try
            n, (a, b) = _period(cols, shift, m)
            if (b - a) // n < needed:
                break
            lengths.append(n)
            stretches.append((a, b))
        else:
            periods = min((b - a) // n for (a, b), n in zip(stretches, lengths, strict=True))
            lead = max(-(-a // n) for (a, _b), n in zip(stretches, lengths, strict=True))
            # kept on the rank with the shortest stretch: the settling (`keep` x K equal periods on every rank),
            # the 2K checked, and margins; the second try also the lead (the latest stretch's start, in periods),
            # for a pipeline that settles late
            n_cut = periods - keep * (K_SIDE + 1) - 2 * K_SIDE - 3 - (lead if keep > 1 else 0)
            if n_cut < MIN_PERIODS:
                continue
            for q in (shift, 2 * shift):
                if m - n_cut * q < 1 or (keep > 1 and 4 * (m - n_cut * q) > 3 * m):
                    continue
                reduced = schedule_lists(config, m - n_cut * q)
                if all(len(a) == len(b) + n_cut * n for a, b, n in zip(full, reduced, lengths, strict=True)):
                    small_columns = tuple(Columns(order) for order in reduced)
                    small = tuple(stretch(cols, shift, n) for cols, n in zip(small_columns, lengths, strict=True))
                    return Cut(n_cut, shift, m - n_cut * q, tuple(lengths), small, reduced, small_columns,
                               tuple(columns))
    return None
