"""Drawn pictures kept beside the results they picture: a table `pictures` in the service's SQLite file, so a
picture is drawn once, and stays drawn across restarts.

A row is keyed by the result's cache key, the picture's kind and its format, and records what drew it
(`drawn_by`: the clustersim version, the digest of its drawing code, service/plots, and matplotlib's version): a
picture drawn by other code is not served, since it may look different (the result key itself changes with the
simulator's code: service.provenance). Pictures of results the store has since deleted (retention) go when the
next picture is put. The table has its own connection (a cache of what can be drawn again: normal sync, not
full); the job store's tables are never written here.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from importlib.metadata import version
from pathlib import Path

from service.provenance import drawing_digest, package_version

__all__ = ["DRAWN_BY", "PictureStore"]

DRAWN_BY = f"clustersim {package_version()} (plots {drawing_digest()[:16]}), matplotlib {version('matplotlib')}"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pictures (
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    format TEXT NOT NULL,
    drawn_by TEXT NOT NULL,
    picture BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (key, kind, format)
);
"""


class PictureStore:
    """Pictures by (result key, kind, format) in the SQLite file at `path` (":memory:": a database of its own)."""

    def __init__(self, path: str, drawn_by: str = DRAWN_BY) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._lock = threading.Lock()
        self._drawn_by = drawn_by
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get(self, key: str, kind: str, fmt: str) -> bytes | None:
        """The stored picture, if one drawn by these versions is kept."""
        with self._lock:
            row = self._db.execute("SELECT picture FROM pictures WHERE key = ? AND kind = ? AND format = ? "
                                   "AND drawn_by = ?", (key, kind, fmt, self._drawn_by)).fetchone()
        return bytes(row[0]) if row else None

    def put(self, key: str, kind: str, fmt: str, picture: bytes) -> None:
        """Keep a picture (replacing one of the same key, kind and format), and let go of the pictures of
        results that are no longer stored."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO pictures (key, kind, format, drawn_by, picture, created_at) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", (key, kind, fmt, self._drawn_by, picture, time.time()))
                if self._has_results():
                    self._db.execute("DELETE FROM pictures WHERE key NOT IN (SELECT key FROM results)")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _has_results(self) -> bool:
        """Whether this database holds the results table (the job store's file; not a database of its own)."""
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'results'"
                                ).fetchone() is not None
