"""A file a request file names by path (cluster.topology, cluster.measured): read relative to the request file."""

from __future__ import annotations

import os

from api_schemas.errors import RequestError


def read_beside(where: str, source: str, field: str) -> tuple[str, str]:
    """(path, text) of the file `where` (relative: to the request file `source`); RequestError naming `field`
    when it cannot be read."""
    path = where if os.path.isabs(where) else os.path.join(os.path.dirname(os.path.abspath(source)), where)
    try:
        with open(path, encoding="utf-8") as handle:
            return path, handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise RequestError.for_field(field, f"{where}: cannot be read ({reason})") from None
