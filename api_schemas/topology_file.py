"""A request's `cluster.topology` given as a file path (the CLI's and the Python API's request files): the file
read and put in its place, so that the request validated is the graph itself. Over HTTP a path is refused (the
graph must be in the request: topology/user_topology.py says so)."""

from __future__ import annotations

import json
from typing import Any

from api_schemas.beside import read_beside
from api_schemas.errors import RequestError

__all__ = ["TOPOLOGY_FIELD", "with_topology_file"]

TOPOLOGY_FIELD = "cluster.topology"


def with_topology_file(data: Any, source: str) -> Any:
    """`data` with its `cluster.topology`, when that is a file path (not GraphML text), replaced by the file's
    graph: node-link JSON (read whole: a graph file is larger than a request may be), or GraphML text for a
    .graphml or .xml file. A relative path is relative to the request file `source`."""
    cluster = data.get("cluster") if isinstance(data, dict) else None
    where = cluster.get("topology") if isinstance(cluster, dict) else None
    if not isinstance(where, str) or where.lstrip().startswith("<"):
        return data
    path, text = read_beside(where, source, TOPOLOGY_FIELD)
    if path.lower().endswith((".graphml", ".xml")):
        graph: Any = text
    else:
        try:
            graph = json.loads(text, parse_constant=_not_a_number)
        except (ValueError, RecursionError) as exc:
            raise RequestError.for_field(TOPOLOGY_FIELD, f"{where} is not valid JSON: {exc}") from None
    assert isinstance(cluster, dict)  # (a path was found in it)
    return {**data, "cluster": {**cluster, "topology": graph}}


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
