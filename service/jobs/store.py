"""Durable state of the service in one SQLite file: accepted jobs and the results cache.

A job is written before the API answers 202, and its result in the same transaction that marks it succeeded,
with ``synchronous=FULL``, so a crash (even SIGKILL) loses neither. Results are keyed by the canonical form of
the request (see `service.http.admission`); a job's result is the cache row of its key, with the Chrome trace
gzip-compressed beside it (zlib in databases written before), read back in chunks (`trace_chunks`) so that no
trace is held whole in the API process. Old finished jobs and results no job refers to are deleted by `prune`.
A job counts its runs apart by how they ended: `attempts` (runs started; a run a graceful stop ended is not
counted), `interruptions` (runs the service's crash or a stop from outside ended: not the job's doing) and
`worker_deaths` (runs whose own process died while the service ran).
Times are Unix seconds. One connection, used from the event loop's thread (and from the threads that stream a
trace, under the same lock).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CachedResult", "JobRow", "Store"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    estimated_events INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    cached INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    kind TEXT NOT NULL DEFAULT 'simulation',
    interruptions INTEGER NOT NULL DEFAULT 0,
    worker_deaths INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    trace BLOB,
    created_at REAL NOT NULL
);
"""

_JOB_COLUMNS = ("seq, id, status, request, cache_key, estimated_events, attempts, cached, created_at, started_at, "
                "finished_at, error, kind, interruptions, worker_deaths")

# The counters a run that ended without an outcome adds to (see `rerun`), by the kind of ending.
_RERUN_COUNTERS = {"interrupted": "interruptions", "worker_died": "worker_deaths"}


@dataclass(frozen=True, slots=True)
class JobRow:
    """A stored job. `request` is the canonical request JSON it runs; `error` an error JSON object or None."""

    seq: int
    id: str
    status: str
    request: str
    cache_key: str
    estimated_events: int
    attempts: int
    cached: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None
    kind: str = "simulation"  # "simulation" or "search"
    interruptions: int = 0  # runs a crash or stop of the service (or a stop signal to the run's process) ended
    worker_deaths: int = 0  # runs whose own process died without answering while the service ran


@dataclass(frozen=True, slots=True)
class CachedResult:
    """A cached result: its JSON text (no trace), its key, whether a Chrome trace is stored beside it, and that
    trace's compressed bytes only when they were just produced (read from the store, it is streamed:
    `Store.trace_chunks`)."""

    result: str
    key: str
    has_trace: bool
    trace: bytes | None = None


TRACE_CHUNK_BYTES = 1 << 16


def _row(values: tuple[object, ...]) -> JobRow:
    (seq, id_, status, request, key, events, attempts, cached, created, started, finished, error, kind,
     interruptions, worker_deaths) = values
    return JobRow(int(seq), str(id_), str(status), str(request), str(key), int(events), int(attempts),  # type: ignore[call-overload]
                  bool(cached), float(created), started, finished, error, str(kind),  # type: ignore[arg-type]
                  int(interruptions), int(worker_deaths))  # type: ignore[call-overload]


class Store:
    """Jobs and cached results in SQLite (WAL journal, full sync)."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self._lock = threading.RLock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._upgrade()

    def _upgrade(self) -> None:
        """Bring a database file written by an older version up to this schema (columns added since)."""
        with self._lock:
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)").fetchall()}
            if "kind" not in columns:
                self._db.execute("ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'simulation'")
            for counter in _RERUN_COUNTERS.values():
                if counter not in columns:
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {counter} INTEGER NOT NULL DEFAULT 0")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def ping(self) -> bool:
        """True when the database answers a query."""
        try:
            with self._lock:
                self._db.execute("SELECT 1").fetchone()
            return True
        except sqlite3.Error:
            return False

    # --- jobs -----------------------------------------------------------------------------------------------

    def add_job(self, job_id: str, request: str, cache_key: str, estimated_events: int,
                status: str = "queued", cached: bool = False, kind: str = "simulation") -> JobRow:
        """Insert a job (queued, or already succeeded from the cache) of a kind (simulation, search); return it."""
        now = time.time()
        finished = now if status == "succeeded" else None
        with self._transaction() as db:
            db.execute("INSERT INTO jobs (id, status, request, cache_key, estimated_events, cached, created_at, "
                       "finished_at, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (job_id, status, request, cache_key, estimated_events, int(cached), now, finished, kind))
        job = self.job(job_id)
        assert job is not None
        return job

    def job(self, job_id: str) -> JobRow | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _row(row) if row else None

    def jobs(self, limit: int, before_seq: int | None = None, status: str | None = None) -> list[JobRow]:
        """Up to `limit` jobs, newest first, older than `before_seq` when given, of one status when given."""
        where: list[str] = []
        args: list[object] = []
        if before_seq is not None:
            where.append("seq < ?")
            args.append(before_seq)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._lock:
            rows = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs {clause} ORDER BY seq DESC LIMIT ?",
                                    (*args, limit)).fetchall()
        return [_row(r) for r in rows]

    def count(self, status: str) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM jobs WHERE status = ?", (status,)).fetchone()[0])

    def counts(self) -> dict[str, int]:
        """Jobs by status (statuses with none left out)."""
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}

    def claim_next(self) -> JobRow | None:
        """The oldest queued job, now marked running (one more attempt, started now); None if none waits."""
        with self._transaction() as db:
            row = db.execute("SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET status = 'running', attempts = attempts + 1, started_at = ? WHERE id = ?",
                       (time.time(), row[0]))
        return self.job(row[0])

    def finish(self, job_id: str, status: str, error: str | None = None) -> bool:
        """Mark a running job finished (failed, timed_out); False if it was not running (cancelled)."""
        with self._transaction() as db:
            cur = db.execute("UPDATE jobs SET status = ?, error = ?, finished_at = ? "
                             "WHERE id = ? AND status = 'running'", (status, error, time.time(), job_id))
        return cur.rowcount == 1

    def succeed(self, job_id: str, cache_key: str, result: str, trace: bytes | None, cached: bool) -> bool:
        """Store the result and mark the running job succeeded, in one transaction."""
        with self._transaction() as db:
            self._put_result(db, cache_key, result, trace)
            cur = db.execute("UPDATE jobs SET status = 'succeeded', cached = ?, error = NULL, finished_at = ? "
                             "WHERE id = ? AND status = 'running'", (int(cached), time.time(), job_id))
        return cur.rowcount == 1

    def cancel(self, job_id: str, error: str) -> bool:
        """Mark a queued or running job cancelled; False if it had already finished."""
        with self._transaction() as db:
            cur = db.execute("UPDATE jobs SET status = 'cancelled', error = ?, finished_at = ? "
                             "WHERE id = ? AND status IN ('queued', 'running')", (error, time.time(), job_id))
        return cur.rowcount == 1

    def requeue(self, job_id: str) -> None:
        """Put a running job back in the queue (the service is stopping; it runs again after the restart). The
        interrupted run is not counted at all, not even in `attempts`."""
        with self._transaction() as db:
            db.execute("UPDATE jobs SET status = 'queued', attempts = MAX(attempts - 1, 0) "
                       "WHERE id = ? AND status = 'running'", (job_id,))

    def rerun(self, job_id: str, ending: str) -> bool:
        """Queue a running job again after a run that ended without an outcome, counting that run by its
        `ending`: "interrupted" (not the job's doing) or "worker_died" (its own process died). False if the job
        was not running (cancelled meanwhile)."""
        counter = _RERUN_COUNTERS[ending]
        with self._transaction() as db:
            cur = db.execute(f"UPDATE jobs SET status = 'queued', {counter} = {counter} + 1 "
                             "WHERE id = ? AND status = 'running'", (job_id,))
        return cur.rowcount == 1

    def recover(self, max_interruptions: int, error: str) -> tuple[int, int]:
        """At start-up: a job left running by a process that died was interrupted by that death, not by anything
        it did, so it is queued again with one more interruption; one whose runs have been interrupted
        `max_interruptions` times fails with `error` instead. Returns (requeued, failed)."""
        with self._transaction() as db:
            db.execute("UPDATE jobs SET interruptions = interruptions + 1 WHERE status = 'running'")
            failed = db.execute("UPDATE jobs SET status = 'failed', error = ?, finished_at = ? "
                                "WHERE status = 'running' AND interruptions >= ?",
                                (error, time.time(), max_interruptions)).rowcount
            requeued = db.execute("UPDATE jobs SET status = 'queued' WHERE status = 'running'").rowcount
        return requeued, failed

    # --- results cache --------------------------------------------------------------------------------------

    @staticmethod
    def _put_result(db: sqlite3.Connection, key: str, result: str, trace: bytes | None) -> None:
        # A new run without a trace keeps a trace recorded earlier for the same request.
        db.execute("INSERT INTO results (key, result, trace, created_at) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (key) DO UPDATE SET result = excluded.result, "
                   "trace = COALESCE(excluded.trace, results.trace)", (key, result, trace, time.time()))

    def put_result(self, key: str, result: str, trace: bytes | None) -> None:
        with self._transaction() as db:
            self._put_result(db, key, result, trace)

    def result(self, key: str) -> CachedResult | None:
        with self._lock:
            row = self._db.execute("SELECT result, trace IS NOT NULL FROM results WHERE key = ?", (key,)).fetchone()
        return CachedResult(row[0], key, bool(row[1])) if row else None

    def trace_chunks(self, key: str, chunk_bytes: int = TRACE_CHUNK_BYTES) -> Iterator[bytes]:
        """The stored (compressed) trace of `key`, a chunk at a time (SQLite's incremental blob reads); nothing
        if there is none."""
        with self._lock:
            row = self._db.execute("SELECT rowid, length(trace) FROM results WHERE key = ? AND trace IS NOT NULL",
                                   (key,)).fetchone()
        if row is None:
            return
        rowid, size = row
        offset = 0
        while offset < size:
            with self._lock, self._db.blobopen("results", "trace", rowid, readonly=True) as blob:
                blob.seek(offset)
                data = blob.read(chunk_bytes)
            if not data:
                return
            offset += len(data)
            yield data

    def prune(self, before: float) -> tuple[int, int]:
        """Delete finished jobs that finished before `before`, then results created before it that no job refers
        to; (jobs, results) deleted."""
        with self._transaction() as db:
            jobs = db.execute("DELETE FROM jobs WHERE status NOT IN ('queued', 'running') AND finished_at < ?",
                              (before,)).rowcount
            results = db.execute("DELETE FROM results WHERE created_at < ? AND key NOT IN "
                                 "(SELECT cache_key FROM jobs)", (before,)).rowcount
        return jobs, results

    def has_result(self, key: str, with_trace: bool) -> bool:
        with self._lock:
            row = self._db.execute("SELECT trace IS NOT NULL FROM results WHERE key = ?", (key,)).fetchone()
        return row is not None and (bool(row[0]) or not with_trace)
