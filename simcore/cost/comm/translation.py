"""The kept links of a pattern of many equally spaced hops, counted per translation class instead of hop by hop,
so that a data-parallel ring or the mirrored pipeline sends of 256 replicas cost what those of a few do.

Why it is exact. On a cluster of one GPU kind with no degraded link and whole nodes, moving every GPU by a
`block` of GPUs (a multiple of LEAF_DOWN_PORTS nodes and of the NVLink domain) maps the fabric onto itself: a
route from src + block to dst + block is the route from src to dst with every link moved to the same link one
block on (topology/routing.py: leaves, rails, spines and PXN proxies depend on node indices only modulo
LEAF_DOWN_PORTS nodes; topology/links.py: the ids of each kind of link move by a fixed stride per block), of the
same capacity and latency. A hop is then a canonical hop (moved down by whole blocks until its lower end is in
the first) and a block offset, and a run of hops src + i * step -> dst + i * step (step dividing the block) is a
few canonical hops, each at a range of consecutive offsets. A link's load is its count of hops times their
common weight (added one hop at a time, as LinkLoads adds them: the same float), and the count of the link of
class c in block b is the number of canonical hops through c at an offset that lands on b: piecewise constant in
b, so the most loaded links (load over capacity, then id: keep_links's order) and the loads of the primary links
come from a few pieces. tests/simcore/cost/comm/test_translation.py holds this to the hop-by-hop build; anything else
(mixed weights, links added by id, mixed GPUs, degraded links, partial nodes, a cluster of less than two blocks)
is built hop by hop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from heapq import nsmallest

from simcore.cost.comm.patterns import FlowPattern
from topology.cluster_spec import LEAF_DOWN_PORTS
from topology.links import LinkIndex, PerLink
from topology.routing import Router

Run = tuple[int, int, int, int, float]  # (src, dst, step, count, weight): hops src + i*step -> dst + i*step


class Blocks:
    """Link ids by (class, block): `canon(link)` is (the link moved to the first block, its block); the link of
    class c in block b is c + b * stride(c)."""

    def __init__(self, router: Router, block: int) -> None:
        cluster = router.cluster
        spec, index = cluster.spec, cluster.index
        assert isinstance(index, LinkIndex), "translation classes need a built-in fabric (index.uniform)"
        self.block = block
        self.nic_base, self.spine_base, self.leaves = index.nic_base, index.spine_base, index.leaves
        self.nics, self.gpn = spec.nics_per_node, spec.gpus_per_node
        self.leaves_per_block = self.nics * block // (self.gpn * LEAF_DOWN_PORTS)
        self.strides = (4 * block, 2 * (block // self.gpn) * self.nics, 2 * self.leaves_per_block)

    def canon(self, link: int) -> tuple[int, int, int]:
        """(class link, block, stride)."""
        if link < self.nic_base:
            b = link // 4 // self.block
            stride = self.strides[0]
        elif link < self.spine_base:
            b = (link - self.nic_base) // 2 // self.nics * self.gpn // self.block
            stride = self.strides[1]
        else:
            b = (link - self.spine_base) // 2 % self.leaves // self.leaves_per_block
            stride = self.strides[2]
        return link - b * stride, b, stride


def block_of(router: Router, runs: Sequence[Run]) -> int | None:
    """The translation block for `runs` (the module docstring), or None when they cannot be counted by class."""
    cluster = router.cluster
    spec = cluster.spec
    if not cluster.index.uniform or spec.num_gpus % spec.gpus_per_node or not runs or not cluster.index.leaves:
        return None
    weight = runs[0][4]
    block = math.lcm(LEAF_DOWN_PORTS * spec.gpus_per_node, spec.domain_gpus)
    for src, _dst, step, count, w in runs:
        if w != weight or src < 0:
            return None
        if step and count > 1:  # (a single hop's step plays no part)
            block = math.lcm(block, abs(step))
    return block if 2 * block <= spec.num_gpus else None


def _folded(weight: float, counts: Iterable[int]) -> dict[int, float]:
    """{n: weight added n times from 0.0}, the float LinkLoads gets from n hops."""
    wanted = set(counts)
    out, total = {}, 0.0
    for n in range(1, max(wanted, default=0) + 1):
        total += weight
        if n in wanted:
            out[n] = total
    return out


# kept links' loads, worst hop latency, and whether the pattern loads at most one direction of each link
Counted = tuple[dict[int, float], float, bool]


def counted_pattern(router: Router, runs: Sequence[Run], block: int, primary: set[int], capacity: PerLink,
                    extra: int, latency_of: Callable[[float], float],
                    memo: dict[tuple[object, ...], Counted] | None = None) -> FlowPattern:
    """keep_links(pattern of `runs`, primary, capacity, extra), the pattern's latency latency_of(worst hop
    latency), counted per translation class (block from block_of). With `memo`, a pattern that is another's
    moved by whole blocks (the same sends from every pipeline stage, say) is that one's, moved: every link moves
    by its class's stride, which keeps the links' order (each class keeps its own range of ids).

    A pattern whose hops are another's reversed (the backward sends of the forward ones) is that one's with every
    link turned round (id ^ 1: the two directions of a link are ids 2k and 2k + 1), where that one loads at most
    one direction of each link and every hop joins GPUs of the same local index on their nodes: then the route
    back is the route there turned round (topology/routing.py: the same rail, so no PXN proxy, and the same spine,
    chosen from both ends' ports and that rail), of the same links' kinds added in the mirrored order, hence the
    same latency; both directions of a link have the same capacity; and turning round keeps the order of the
    links' ids, so the same links are the most loaded."""
    blocks = Blocks(router, block)
    if memo is None:
        kept, worst, _one_way = _count(router, blocks, runs, primary, capacity, extra)
    else:
        lowest = min(min(src, dst, src + (count - 1) * step, dst + (count - 1) * step)
                     for src, dst, step, count, _w in runs) // block
        shift = lowest * block
        moved = tuple((src - shift, dst - shift, step, count, w) for src, dst, step, count, w in runs)
        # (a primary link below the lowest block carries none of the pattern: no hop reaches under its lower end)
        moved_primary = frozenset(c + (b - lowest) * stride for c, b, stride in map(blocks.canon, primary)
                                  if b >= lowest)
        key = (block, extra, moved, moved_primary)
        found = memo.get(key)
        if found is None:
            gpn = router.cluster.spec.gpus_per_node
            back = memo.get((block, extra, tuple((dst, src, step, count, w) for src, dst, step, count, w in moved),
                             frozenset(link ^ 1 for link in moved_primary)))
            if back is not None and back[2] and all((dst - src) % gpn == 0 for src, dst, *_rest in moved):
                found = memo[key] = ({link ^ 1: load for link, load in back[0].items()}, back[1], True)
            else:
                found = memo[key] = _count(router, blocks, moved, set(moved_primary), capacity, extra)
        kept = {}
        for link, load in found[0].items():
            c, b, stride = blocks.canon(link)
            kept[c + (b + lowest) * stride] = load
        worst = found[1]
    links = tuple(sorted(kept))
    return FlowPattern(links, tuple(kept[link] for link in links), latency_of(worst))


def _count(router: Router, blocks: Blocks, runs: Sequence[Run], primary: set[int], capacity: PerLink,
           extra: int) -> Counted:
    block = blocks.block
    hops: dict[tuple[int, int], list[tuple[int, int]]] = {}  # canonical hop -> [(first block, blocks)]
    for src, dst, step, count, _w in runs:
        if count == 1:  # a single hop
            if src == dst:
                continue
            b = min(src, dst) // block
            hops.setdefault((src - b * block, dst - b * block), []).append((b, 1))
            continue
        period = block // abs(step) if step else 1  # (block_of: a run's step divides the block)
        for r in range(min(period, count)):
            s, d = src + r * step, dst + r * step
            if s == d:
                continue
            b = min(s, d) // block
            times = (count - r + period - 1) // period
            first = b if step >= 0 else b - times + 1
            hops.setdefault((s - b * block, d - b * block), []).append((first, times))
    for key, ranges in hops.items():
        if len(ranges) > 1:  # join ranges that meet end to start (each block then still counts the hop once)
            ranges.sort()
            joined = [ranges[0]]
            for first, times in ranges[1:]:
                last_first, last_times = joined[-1]
                if first == last_first + last_times:
                    joined[-1] = (last_first, last_times + times)
                else:
                    joined.append((first, times))
            hops[key] = joined
    worst = 0.0
    # class link -> the block ranges [first, end) of the hops through it (each moved to the link's block)
    spans: dict[int, list[tuple[int, int]]] = {}
    stride_of: dict[int, int] = {}
    canon_of: dict[int, tuple[int, int, int]] = {}  # (a link is on many canonical hops' paths: canon it once)
    canon, route = blocks.canon, router.route_and_latency
    # A hop back (d -> s over the same blocks as s -> d) between GPUs of the same local index takes the route
    # there turned round (counted_pattern's docstring): its links are those ids ^ 1, in the same blocks.
    gpn = router.cluster.spec.gpus_per_node
    turns = all((dst - src) % gpn == 0 for src, dst, *_rest in runs)
    turned: set[tuple[int, int]] = set()
    for (s, d), ranges in hops.items():
        if (s, d) in turned:
            continue
        back = turns and hops.get((d, s)) == ranges
        if back:
            turned.add((d, s))
        path, latency = route(s, d)
        if latency > worst:
            worst = latency
        for link in path:
            got = canon_of.get(link)
            if got is None:
                got = canon_of[link] = canon(link)
                stride_of[got[0]] = stride_of[got[0] ^ 1] = got[2]
            c, b = got[0], got[1]
            moved = [(first + b, first + b + times) for first, times in ranges]
            for cls in ((c, c ^ 1) if back else (c,)):
                found = spans.get(cls)
                if found is None:
                    spans[cls] = moved[:]
                else:
                    found.extend(moved)
    pieces: dict[int, list[tuple[int, int, int]]] = {}  # class link -> [(first block, end block, hops)]
    for c, found in spans.items():
        if len(found) == 1:  # one hop's range (most links)
            first, end = found[0]
            pieces[c] = [(first, end, 1)]
            continue
        edges: dict[int, int] = {}
        for first, end in found:
            edges[first] = edges.get(first, 0) + 1
            edges[end] = edges.get(end, 0) - 1
        level, start, out = 0, 0, []
        for b in sorted(edges):
            if level:
                out.append((start, b, level))
            level += edges[b]
            start = b
        pieces[c] = out
    weight = runs[0][4]
    folded = _folded(weight, (n for parts in pieces.values() for _a, _b, n in parts))
    # A piece's links share its ratio and their ids rise block by block, so each of the `extra` first links is
    # in a piece whose first link is among the `extra` first of the pieces' first links.
    heads: list[tuple[float, int, int, int, int]] = []  # (ratio, first link, stride, blocks, hops)
    for c, parts in pieces.items():
        stride, cap = stride_of[c], capacity[c]
        if len(parts) == 1:
            a, end, n = parts[0]
            heads.append((-folded[n] / cap, c + a * stride, stride, end - a, n))
        else:
            heads.extend((-folded[n] / cap, c + a * stride, stride, end - a, n) for a, end, n in parts)
    candidates = [(ratio, head + i * stride, n) for ratio, head, stride, span, n in nsmallest(extra, heads)
                  for i in range(min(span, extra))]
    kept = {link: folded[n] for _ratio, link, n in nsmallest(extra, candidates)}
    for link in primary:
        c, b, _stride = blocks.canon(link)
        for a, end, n in pieces.get(c, ()):
            if a <= b < end:
                kept[link] = folded[n]
    return kept, worst, _one_way(pieces)


def _one_way(pieces: dict[int, list[tuple[int, int, int]]]) -> bool:
    """Does the pattern load at most one direction of each link (ids 2k and 2k + 1: classes c and c ^ 1 in the
    same block)?"""
    for c, parts in pieces.items():
        other = pieces.get(c ^ 1) if not c & 1 else None
        if other is not None and any(a < end_b and b < end for a, end, _n in parts for b, end_b, _m in other):
            return False
    return True
