"""GET /metrics: the service's figures in Prometheus' text format (prometheus-client), one registry per app.

- `clustersim_http_requests_total{route, method, status}` and `clustersim_http_request_duration_seconds{route,
  method}`: every HTTP request, by the route's path template (`/v1/jobs/{job_id}`; `/web/{path}` for the page's
  static files; `unmatched` for paths no route serves, so unknown paths cannot grow the series without bound).
- `clustersim_runs_total{kind, outcome}` and `clustersim_run_duration_seconds{kind}`: the runs of the worker
  processes, by kind (`simulation` inline or as a job, `search`, `picture`) and outcome (`ok`, `invalid`, `error`,
  `timeout`, `cancelled`); `clustersim_simulations_total` counts the simulations that finished (ok).
- `clustersim_worker_deaths_total`: worker processes that died without an answer (killed, out of memory);
  each run has a process of its own, so the next run starts a fresh one.
- `clustersim_results_cache_total{outcome}`: results-cache lookups of inline simulations, pictures and job
  submissions (`hit`, `miss`).
- `clustersim_jobs{status}`, `clustersim_queue_depth`, `clustersim_running_jobs`, `clustersim_inline_waiting`:
  read from the store and the service when scraped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.jobs.pool import RunResult

__all__ = ["CONTENT_TYPE", "JOB_STATES", "ServiceMetrics", "MetricsMiddleware"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "timed_out")
disable_created_metrics()  # no `_created` series beside each counter: a scrape reads what it needs, no more
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RUN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)


class _Live(Collector):
    """Gauges read when scraped: jobs by status, queue depth, running jobs, inline runs waiting."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        live = self._read()
        jobs = GaugeMetricFamily("clustersim_jobs", "jobs in the store, by status", labels=["status"])
        for status in JOB_STATES:
            jobs.add_metric([status], live["jobs"].get(status, 0))
        yield jobs
        yield GaugeMetricFamily("clustersim_queue_depth", "jobs waiting for a worker", value=live["jobs"].get(
            "queued", 0))
        yield GaugeMetricFamily("clustersim_running_jobs", "jobs running in worker processes now",
                                value=live["running"])
        yield GaugeMetricFamily("clustersim_inline_waiting", "inline simulations waiting for a slot",
                                value=live["inline_waiting"])


class ServiceMetrics:
    """The service's registry and the counters its parts update."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("clustersim_http_requests", "HTTP requests answered",
                                ["route", "method", "status"], registry=r)
        self.latency = Histogram("clustersim_http_request_duration_seconds", "HTTP request latency, seconds",
                                 ["route", "method"], buckets=_LATENCY_BUCKETS, registry=r)
        self.runs = Counter("clustersim_runs", "worker-process runs, by kind and outcome", ["kind", "outcome"],
                            registry=r)
        self.run_seconds = Histogram("clustersim_run_duration_seconds", "wall time of worker-process runs, seconds",
                                     ["kind"], buckets=_RUN_BUCKETS, registry=r)
        self.simulations = Counter("clustersim_simulations", "simulations that finished with a result", registry=r)
        self.worker_deaths = Counter("clustersim_worker_deaths", "worker processes that died without an answer",
                                     registry=r)
        self.cache = Counter("clustersim_results_cache", "results-cache lookups", ["outcome"], registry=r)
        for outcome in ("hit", "miss"):
            self.cache.labels(outcome)

    def watch(self, read: Callable[[], dict[str, Any]]) -> None:
        """Add the gauges read at scrape time: `read()` gives {"jobs": {status: n}, "running", "inline_waiting"}."""
        self.registry.register(_Live(read))

    def run_finished(self, kind: str, outcome: RunResult, seconds: float) -> None:
        """A worker-process run ended (the pool's observer)."""
        self.runs.labels(kind, outcome.status).inc()
        self.run_seconds.labels(kind).observe(seconds)
        if kind == "simulation" and outcome.status == "ok":
            self.simulations.inc()
        if outcome.error_type == "WorkerDied":
            self.worker_deaths.inc()

    def cache_lookup(self, hit: bool) -> None:
        self.cache.labels("hit" if hit else "miss").inc()

    def exposition(self) -> bytes:
        """The text format a Prometheus server scrapes."""
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts and times every HTTP request by its route's path template (a plain ASGI middleware: it sees the
    status line and lets the body stream through untouched)."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception that escapes every handler ends as a 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            mounted = str(scope.get("root_path", ""))  # set by a Mount that served it: /web, /docs/assets
            template = str(getattr(route, "path", None) or (f"{mounted}/{{path}}" if mounted else "unmatched"))
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(template, method, str(status)).inc()
            self.metrics.latency.labels(template, method).observe(time.perf_counter() - started)
