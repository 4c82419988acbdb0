"""Layout search: which layouts of a model, cluster and global batch train fastest, and why.

    from simcore.planning import Bounds, Space, search
    result = search(base_scenario, global_batch_size, Space(), Bounds(max_candidates=50))

space.py generates the layouts, prune.py discards what breaks a rule or does not fit (memory from
simcore.cost.memory itself), estimate.py orders the rest by a closed form built on simcore.cost, screen.py keeps
from simulation what a caller's cost limits exclude, rank.py simulates, ranks and explains, executors.py and
worker.py say where candidates run (lifeline.py: pool workers end with their owner; ray_keeper.py: so does a
local Ray runtime), search.py puts them together.

The names below are imported when first used: importing one module of the package (the request converter's
`simcore.planning.space`) does not import the executors (multiprocessing) and the search with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simcore.planning.executors import EXECUTORS, ExecutorError
    from simcore.planning.search import Bounds, Ranked, SearchResult, StoppedBy, search
    from simcore.planning.space import Space

__all__ = ["EXECUTORS", "Bounds", "ExecutorError", "Ranked", "SearchResult", "Space", "StoppedBy", "search"]
_HOMES = {"EXECUTORS": "executors", "ExecutorError": "executors", "Bounds": "search", "Ranked": "search",
          "SearchResult": "search", "StoppedBy": "search", "search": "search", "Space": "space"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'simcore.planning' has no attribute {name!r}")
    value = getattr(import_module(f"simcore.planning.{home}"), name)
    globals()[name] = value
    return value
