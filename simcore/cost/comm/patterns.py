"""Link-load patterns: which links a transfer loads and by how much per unit of its progress.

A static description, built by the collective model (simcore/cost/comm/collectives.py) and run by the flow network
(simcore/engine/flows.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import nsmallest
from operator import neg, truediv

from topology.links import PerLink


@dataclass(frozen=True, slots=True)
class FlowPattern:
    """Links a group loads (link ids) and its load on each (bytes per unit of progress), plus fixed latency."""

    links: tuple[int, ...]
    loads: tuple[float, ...]
    latency_s: float = 0.0

    def isolated_rate(self, capacity: PerLink) -> float:
        """Units per second when nothing else shares the links."""
        return min(capacity[link] / load for link, load in zip(self.links, self.loads))


# How many of a pattern's most loaded links (load over capacity) `keep_links` keeps besides the simulated flow's
# own: for the mirror copies of a pipeline send, and for a collective phase (which also keeps every link of the
# first GPU's node). A truncation for speed, not a measured figure: the first kept link is the pattern's
# bottleneck, so the rate of a group alone is exact with 1; more keep more of the contention on other links.
# These are the values every golden result (tests/golden, bench/golden_results.py) was made with. Measured on
# the 85 requests of bench/golden_results.py: keeping 1 of each instead gives the same results; 64 of each
# changes one iteration time (+0.08%, search-14); keeping every link changes 4 (+0.004%, +0.08%, +11.7%, +80.7%:
# search-10 and search-22, ZeRO 2 with interleaved pipelines of 32 stages, whose data-parallel collectives of
# different stages then meet on the fabric's links) and costs about 20% more CPU time on bench/speed_1t.py.
MIRROR_KEPT_LINKS = 4
COLLECTIVE_KEPT_LINKS = 8


def keep_links(pattern: FlowPattern, primary: set[int], capacity: PerLink, extra: int) -> FlowPattern:
    """The pattern restricted to the `primary` links (the simulated flow's own path) and the `extra` links that
    the pattern loads most (load over capacity; ties by link id). Used for the mirror copies of a representative
    transfer and for the concurrent copies of a collective: they are symmetric images of the simulated flow, so
    contention on their other links repeats what happens on the kept ones, and the kept bottlenecks still set
    the rate."""
    # (heapq.nsmallest(n, ...) is sorted(...)[:n]; the keys are unique by link id)
    ratios = map(truediv, map(neg, pattern.loads), map(capacity.__getitem__, pattern.links))
    chosen = {link for _ratio, link in nsmallest(extra, zip(ratios, pattern.links))} | primary
    kept = [(link, w) for link, w in zip(pattern.links, pattern.loads) if link in chosen]
    return FlowPattern(tuple(link for link, _w in kept), tuple(w for _l, w in kept), pattern.latency_s)
