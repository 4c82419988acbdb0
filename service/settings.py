"""The HTTP service's settings, read from the environment (prefix ``CLUSTERSIM_``) with pydantic-settings.

Every limit is an admission rule: a request over it is refused before any simulation runs (413, or 429 for a
full queue), so one request cannot knock the service over. Units are in the names (``_bytes``, ``_s``, ``_mb``).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.limits import (
    MAX_GPUS,
    MAX_INLINE_EVENTS,
    MAX_INLINE_SECONDS,
    MAX_JOB_EVENTS,
    MAX_JOB_SECONDS,
    MAX_MICROBATCHES,
    MAX_TRACE_BYTES,
    MIB,
    Limits,
    default_workers,
    memory_cap_mb,
)

__all__ = ["Settings", "default_database"]


def default_database() -> str:
    """clustersim.db in the user's data directory: $XDG_DATA_HOME/clustersim when XDG_DATA_HOME is an absolute
    path (the XDG base directory rule: a relative one is ignored), else ~/.local/share/clustersim. Nothing is
    created here: the service makes the folder when it opens the database."""
    base = os.environ.get("XDG_DATA_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return str(root / "clustersim" / "clustersim.db")


class Settings(BaseSettings):
    """``CLUSTERSIM_<FIELD>`` sets each field, e.g. ``CLUSTERSIM_WORKERS=4``."""

    model_config = SettingsConfigDict(env_prefix="CLUSTERSIM_", extra="ignore", frozen=True)

    host: str = Field(default="127.0.0.1",
                      description="address `clustersim serve` listens on when --host is not given; on a loopback "
                      "address without a token, requests must name a local Host (DNS rebinding)")
    allowed_hosts: str = Field(default="",
                               description="comma-separated host names accepted in the Host and Origin headers "
                               "besides localhost, 127.0.0.1 and ::1 (checked only on a loopback address without a "
                               "token; '*' accepts any)")
    port: int = Field(default=8000, ge=0, le=65535,
                      description="TCP port of `clustersim serve` when --port is not given (and of the container's "
                      "health check)")
    database: str = Field(
        default_factory=default_database,
        description="SQLite file for jobs and the results cache: a path, or a URL sqlite:///relative/path or "
        "sqlite:////absolute/path; by default clustersim.db in the user's data directory, "
        "$XDG_DATA_HOME/clustersim (else ~/.local/share/clustersim), created on demand, never the working "
        "directory",
    )
    workers: int = Field(default_factory=default_workers, ge=1,
                         description="simulation processes at once for jobs (and as many again for inline runs)")
    max_body_bytes: int = Field(default=1_000_000, ge=1, description="largest request body")
    body_timeout_s: float = Field(default=30.0, gt=0,
                                  description="time a client has to send a request body, from its headers (408)")
    max_connections: int = Field(default=256, ge=1,
                                 description="open connections `clustersim serve` accepts at once (uvicorn's "
                                 "limit_concurrency); over it a request is answered 503")
    max_gpus: int = Field(default=MAX_GPUS, ge=1, description="largest cluster a request may describe")
    max_microbatches: int = Field(default=MAX_MICROBATCHES, ge=1,
                                  description="most microbatches per pipeline per iteration")
    max_inline_events: int = Field(default=MAX_INLINE_EVENTS, ge=1,
                                   description="estimated engine events above which POST /v1/simulations says "
                                   "413 and points to jobs (about 3 s of simulation)")
    max_job_events: int = Field(default=MAX_JOB_EVENTS, ge=1,
                                description="estimated engine events a job may need")
    max_inline_seconds: float = Field(default=MAX_INLINE_SECONDS, gt=0,
                                      description="estimated CPU seconds above which POST /v1/simulations says 413 "
                                      "and points to jobs")
    max_job_seconds: float = Field(default=MAX_JOB_SECONDS, gt=0,
                                   description="estimated CPU seconds a job may need")
    max_trace_bytes: int = Field(default=MAX_TRACE_BYTES, ge=1024,
                                 description="largest stored (gzip) trace: a run whose estimated trace is larger is "
                                 "refused (413), one whose trace turns out larger fails (trace_too_large)")
    retention_days: float = Field(default=30.0, ge=0,
                                  description="finished jobs, and results no job refers to, older than this are "
                                  "deleted (hourly); 0 keeps everything")
    max_search_candidates: int = Field(default=200, ge=1,
                                       description="most layouts one POST /v1/searches job simulates (caps the "
                                       "request's bounds.max_candidates)")
    max_search_space: int = Field(default=4_000_000, ge=1,
                                  description="most layouts a search's space may generate, by an upper bound "
                                  "checked before POST /v1/searches answers (413)")
    max_queued_jobs: int = Field(default=100, ge=1,
                                 description="jobs waiting for a worker (and inline runs waiting for one) before "
                                 "429")
    job_timeout_s: float = Field(default=3600.0, gt=0, description="wall-time limit of one job's simulation")
    inline_timeout_s: float = Field(default=60.0, gt=0, description="wall-time limit of an inline simulation")
    max_job_attempts: int = Field(default=3, ge=1,
                                  description="runs of a job whose own process died before it fails")
    worker_memory_mb: int | None = Field(default=None, ge=64,
                                         description="address-space limit of each simulation process; unset: the "
                                         "machine's memory shared by 2 x workers processes (at least 1024)")
    api_token: SecretStr | None = Field(default=None,
                                        description="when set, every /v1 route needs 'Authorization: Bearer TOKEN'")

    @field_validator("database")
    @classmethod
    def _sqlite_only(cls, value: str) -> str:
        if "://" in value and not value.startswith("sqlite://"):
            raise ValueError("CLUSTERSIM_DATABASE: only SQLite is supported: give a file path or a sqlite:/// URL")
        if value.strip() in ("", "sqlite://", "sqlite:///"):
            # SQLAlchemy reads an empty sqlite URL as a database in memory, which would lose every job and
            # result when the service stops: a path must be given.
            raise ValueError(f"CLUSTERSIM_DATABASE: {value.strip() or 'an empty value'} names no file; give a path, "
                             "a sqlite:///relative/path or a sqlite:////absolute/path URL")
        return value

    def memory_cap_mb(self) -> int:
        """The memory cap of each simulation process: `worker_memory_mb`, or the machine's memory shared by the
        2 x workers processes that may run at once (jobs and inline runs), at least 1 GiB."""
        return memory_cap_mb(self.worker_memory_mb, self.workers)

    def limits(self, inline: bool) -> Limits:
        """What one simulation may be and cost: an inline one, or a job (and a CLI run)."""
        return Limits(max_gpus=self.max_gpus, max_microbatches=self.max_microbatches,
                      max_events=self.max_inline_events if inline else self.max_job_events,
                      max_seconds=self.max_inline_seconds if inline else self.max_job_seconds,
                      memory_bytes=self.memory_cap_mb() * MIB, max_trace_bytes=self.max_trace_bytes)

    def database_path(self) -> str:
        """The SQLite file path: ``database`` itself, or the path of a ``sqlite:///`` URL (never empty: see
        the validator)."""
        value = self.database
        for prefix in ("sqlite:///", "sqlite://"):
            if value.startswith(prefix):
                return value[len(prefix):]
        return value
