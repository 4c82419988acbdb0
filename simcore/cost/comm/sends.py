"""Point-to-point send patterns: a message every (source, destination) pair sends at once, over the real paths of
the cluster graph (pipeline stages' activations and gradients, context parallelism's ring steps). One unit of a
pattern is one byte of each message; the time of a send is set by its most loaded link, and its latency by its
slowest path. Where the user's nccl-tests sendrecv table covers the pair's scope (within a node or across), the
loads are scaled to it (simcore/cost/comm/measured_collectives.py).

`PointToPoint` is what `CollectiveModel` (simcore/cost/comm/collectives.py) offers for sends; it reads the model's
router, link capacity, measured tables and caches.
"""

from __future__ import annotations

from collections.abc import Sequence

from simcore.cost.comm.link_loads import LinkLoads, worst_hop
from simcore.cost.comm.measured_collectives import MeasuredCollectives
from simcore.cost.comm.patterns import MIRROR_KEPT_LINKS, FlowPattern
from simcore.cost.comm.translation import Counted
from simcore.domain.placement import Placement
from topology.links import LinkValues
from topology.routing import Router


class PointToPoint:
    """Send patterns of one cluster, cached by placement (the simulations of a search ask for the same ones for
    many layouts, and the flow network recognises a pattern it has seen by the object)."""

    router: Router
    capacity: LinkValues
    measured: MeasuredCollectives | None
    _counted: dict[tuple[object, ...], Counted]
    _sends: dict[tuple[Placement, int, int, tuple[int, ...]], FlowPattern]

    def p2p(self, pairs: Sequence[tuple[int, int]], mirrors: bool = False) -> FlowPattern:
        """A message sent at once by every (src, dst) pair; one unit = one byte of each message. With `mirrors`,
        the pairs after the first are symmetric copies of it and only the first pair's path and the
        MIRROR_KEPT_LINKS most loaded links are kept (see patterns.keep_links)."""
        acc = LinkLoads(self.router)
        for src, dst in pairs:
            acc.hop(src, dst, 1.0)
        return self._sent(acc, pairs[0] if mirrors and pairs else None, pairs[0] if pairs else None)

    def _sent(self, acc: LinkLoads, first: tuple[int, int] | None,
              pair: tuple[int, int] | None = None) -> FlowPattern:
        """The pattern of messages of one byte per unit in `acc` (its latency: the slowest path's), trimmed to the
        `first` pair's path and the MIRROR_KEPT_LINKS most loaded links when the others mirror it; its loads
        scaled by the user's sendrecv table of `pair`'s scope (within a node or across), where there is one."""
        if first is not None:
            pattern = acc.kept(set(self.router.route(*first)), self.capacity, MIRROR_KEPT_LINKS, worst_hop,
                               self._counted)
        else:
            links = tuple(sorted(acc.loads))
            pattern = FlowPattern(links, tuple(acc.loads[link] for link in links), acc.hop_latency)
        pair = pair or first
        if self.measured is None or pair is None or not self.measured.covers("sendrecv"):
            return pattern
        factor = self.measured.transfer_factor("sendrecv", pair, self._ring_of_sends_s)
        if factor == 1.0:
            return pattern
        return FlowPattern(pattern.links, tuple(w * factor for w in pattern.loads), pattern.latency_s)

    def _ring_of_sends_s(self, _kind: str, ranks: tuple[int, ...], size_bytes: float) -> float:
        """The model's seconds, alone on the links, of nccl-tests' sendrecv over `ranks`: each sends `size_bytes`
        to the next in the ring at once."""
        acc = LinkLoads(self.router)
        for i, src in enumerate(ranks):
            acc.hop(src, ranks[(i + 1) % len(ranks)], 1.0)
        pattern = self._sent(acc, None)  # the model's own pattern (no pair: no measured factor on it)
        return pattern.latency_s + size_bytes / pattern.isolated_rate(self.capacity)

    def pipeline_send(self, placement: Placement, src_rank: int, dst_rank: int,
                      replicas: Sequence[int]) -> FlowPattern:
        """`p2p` of the message every tensor rank of each data-parallel replica in `replicas` sends at once from
        pipeline rank `src_rank` to `dst_rank` (the replicas after the first as its mirrors); cached by placement,
        as `data_parallel_phases`."""
        key = (placement, src_rank, dst_rank, tuple(replicas))
        found = self._sends.get(key)
        if found is None:
            count = len(replicas)
            first = replicas[0] if count else 0
            every = replicas[1] - first if count > 1 else 1
            if count and every > 0 and key[3] == tuple(range(first, first + count * every, every)):
                # equally spaced replicas: each (cp, tp) position's sends are one run of hops (the same loads)
                acc = LinkLoads(self.router)
                for c in range(placement.cp):
                    for t in range(placement.tp):
                        acc.run(placement.gpu(first, t, src_rank, c), placement.gpu(first, t, dst_rank, c),
                                every * placement.strides[0], count, 1.0)
                pair = (placement.gpu(first, 0, src_rank, 0), placement.gpu(first, 0, dst_rank, 0))
                found = self._sends[key] = self._sent(acc, pair if count * placement.cp > 1 else None, pair)
            else:
                pairs = [(placement.gpu(d, t, src_rank, c), placement.gpu(d, t, dst_rank, c))
                         for d in replicas for c in range(placement.cp) for t in range(placement.tp)]
                found = self._sends[key] = self.p2p(pairs, mirrors=len(pairs) > placement.tp)
        return found

    def context_parallel_send(self, placement: Placement, pp_rank: int, replicas: Sequence[int]) -> FlowPattern:
        """`p2p` of one ring step of context parallelism on pipeline rank `pp_rank`: every context-parallel rank of
        each tensor rank and replica in `replicas` sends to the next rank of its ring at once (the first pair,
        replica replicas[0]'s tensor rank 0 from CP rank 0 to 1, is the simulated one; the rest its mirrors). A
        step lasts until its slowest hop has delivered: every rank waits for its own receive before the next
        step, so the ring moves at its slowest link's pace."""
        key = (placement, -1 - pp_rank, -1, tuple(replicas))
        found = self._sends.get(key)
        if found is None:
            cp = placement.cp
            pairs = [(placement.gpu(d, t, pp_rank, c), placement.gpu(d, t, pp_rank, (c + 1) % cp))
                     for d in replicas for t in range(placement.tp) for c in range(cp)]
            found = self._sends[key] = self.p2p(pairs, mirrors=len(pairs) > 1)
        return found
