"""Collective patterns of many groups from their first NVLink domain's, where the other domains' groups are exact
copies of it: the same members moved by a whole number of domains (tensor-parallel groups of every replica, say).

On a cluster of one GPU kind with no degraded link (topology.links.LinkIndex.uniform), moving every GPU of a
pattern that stays inside its domain by D GPUs (D a multiple of the domain's GPUs) moves each of its NVLink links
to the link D * 4 ids on (topology/links.py: GPU g's NVLink up is 2g + 2 * node * gpus_per_node), of the same
capacity and latency. The copies' links are then disjoint, the pattern of all the groups is the first domain's
repeated link by link, and `keep_links` on it can be taken from the first domain's pattern: its own links (the
first GPU's domain, all kept) and the `extra` most loaded links of all copies, ranked by load over capacity and
link id as keep_links ranks them. tests/simcore/cost/comm/test_symmetry.py holds this to the pattern built group by
group; anything else (mixed GPUs, degraded links, groups across domains, copies that are not exact) is built
group by group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simcore.cost.comm.groups import GroupCopies
from simcore.cost.comm.link_loads import Phase
from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.comm.translation import Counted
from topology.graph import Cluster
from topology.links import PerLink

Groups = tuple[tuple[int, ...], ...] | GroupCopies


def domain_copies(cluster: Cluster, groups: Groups) -> tuple[int, Sequence[int]] | None:
    """(c, offsets) when the groups are the first c groups (all inside the first member's NVLink domain) and
    copies of them moved by `offsets` GPUs (whole domains, each copy into a domain of its own; offsets[0] = 0),
    in that order; None otherwise, or on a cluster whose links are not all alike."""
    if not cluster.index.uniform or not groups or not groups[0]:
        return None
    domain = cluster.spec.domain_gpus
    if isinstance(groups, GroupCopies) and len(groups) > 1:
        home = groups.base[0] // domain
        if not all(g // domain == home for g in groups.base):
            return None  # the first group leaves its domain
        if groups.offsets.step % domain:
            return domain_copies(cluster, tuple(groups))
        # copies whole domains apart: the first group alone in its domain, each copy in a domain of its own
        return 1, groups.offsets
    first = groups[0]
    home = first[0] // domain
    c = 0
    while c < len(groups) and groups[c] and all(g // domain == home for g in groups[c]):
        c += 1
    if c == 0 or len(groups) % c:  # the first group leaves its domain, or no whole number of copies
        return None
    offsets = []
    for j in range(0, len(groups), c):
        if not groups[j] or len(groups[j]) != len(first):
            return None
        delta = groups[j][0] - first[0]
        if delta % domain:
            return None
        for i in range(c):
            if groups[j + i] != tuple(map(delta.__add__, groups[i])):
                return None
        offsets.append(delta)
    if len(set(offsets)) != len(offsets):
        return None
    return c, tuple(offsets)


def kept_copies(one: FlowPattern, shifts: Sequence[int], capacity: PerLink, extra: int) -> FlowPattern:
    """keep_links of the pattern made of `one` and its copies with every link id moved by each of `shifts`
    (shifts[0] = 0: `one` itself; copies disjoint, of equal capacities), keeping all of `one`'s links and the
    `extra` most loaded links of the whole (load over capacity, then link id)."""
    levels: dict[float, list[tuple[int, float]]] = {}
    for link, w in zip(one.links, one.loads):
        levels.setdefault(-w / capacity[link], []).append((link, w))
    if isinstance(shifts, range):  # (the `extra` lowest, without listing every copy)
        ordered = sorted(shifts[:extra] if shifts.step > 0 else shifts[-extra:])
    else:
        ordered = sorted(shifts)[:extra]
    top: dict[int, float] = {}
    for ratio in sorted(levels):
        if len(top) >= extra:
            break
        members = levels[ratio][:extra]  # one's links are in id order
        candidates = sorted((link + shift, w) for link, w in members for shift in ordered)
        top.update(candidates[:extra - len(top)])
    merged = dict(zip(one.links, one.loads)) | top
    links = tuple(sorted(merged))
    return FlowPattern(links, tuple(merged[link] for link in links), one.latency_s)


def kept_phases(cluster: Cluster, groups: Groups, build: Callable[[Groups], tuple[Phase, ...]],
                primary: set[int], capacity: PerLink, extra: int,
                memo: dict[tuple[object, ...], Counted] | None = None) -> tuple[FlowPattern, ...]:
    """keep_links(phase, primary, capacity, extra) of each phase of build(groups), from the first domain's groups
    alone when the others are copies of them and `primary` is that domain's links (the module docstring)."""
    copies = domain_copies(cluster, groups)
    if copies is not None and len(copies[1]) > 1:
        c, offsets = copies
        ones = [acc.pattern(latency_of) for acc, latency_of in build(groups[:c])]
        if all(link < cluster.index.nic_base and link in primary for one in ones for link in one.links):
            shifts = (range(0, 4 * offsets.stop, 4 * offsets.step) if isinstance(offsets, range)
                      else [4 * offset for offset in offsets])
            return tuple(kept_copies(one, shifts, capacity, extra) for one in ones)
    return tuple(acc.kept(primary, capacity, extra, latency_of, memo) for acc, latency_of in build(groups))
