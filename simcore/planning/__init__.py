"""Layout search: which layouts of a model, cluster and global batch train fastest, and why.

    from simcore.planning import Bounds, Space, search
    result = search(base_scenario, global_batch_size, Space(), Bounds(max_candidates=50))

space.py generates the layouts, prune.py discards what breaks a rule or does not fit (memory from
simcore.cost.memory itself), estimate.py orders the rest by a closed form built on simcore.cost, rank.py
simulates, ranks and explains, executors.py and worker.py say where candidates run, search.py puts them together.
"""

from __future__ import annotations

from simcore.planning.executors import EXECUTORS, ExecutorError
from simcore.planning.search import Bounds, Ranked, SearchResult, StoppedBy, search
from simcore.planning.space import Space

__all__ = ["EXECUTORS", "Bounds", "ExecutorError", "Ranked", "SearchResult", "Space", "StoppedBy", "search"]
