"""Link-load patterns: which links a transfer loads and by how much per unit of its progress.

A static description, built by the collective model (simcore/cost/collectives.py) and run by the flow network
(simcore/engine/flows.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FlowPattern:
    """Links a group loads (link ids) and its load on each (bytes per unit of progress), plus fixed latency."""

    links: tuple[int, ...]
    loads: tuple[float, ...]
    latency_s: float = 0.0

    def isolated_rate(self, capacity: Sequence[float]) -> float:
        """Units per second when nothing else shares the links."""
        return min(capacity[link] / load for link, load in zip(self.links, self.loads))


def keep_links(pattern: FlowPattern, primary: set[int], capacity: Sequence[float], extra: int = 4) -> FlowPattern:
    """The pattern restricted to the `primary` links (the simulated flow's own path) and the `extra` links that
    the pattern loads most (load over capacity). Used for the mirror copies of a representative transfer: they
    are symmetric images of the simulated flow, so contention on their other links repeats what happens on the
    kept ones, and the kept bottlenecks still set the rate."""
    ranked = sorted(zip(pattern.links, pattern.loads), key=lambda lw: (-lw[1] / capacity[lw[0]], lw[0]))
    chosen = {link for link, _w in ranked[:extra]} | primary
    kept = [(link, w) for link, w in zip(pattern.links, pattern.loads) if link in chosen]
    return FlowPattern(tuple(link for link, _w in kept), tuple(w for _l, w in kept), pattern.latency_s)
