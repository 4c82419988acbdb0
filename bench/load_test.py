"""Load test of the HTTP service: starts `clustersim serve` on 127.0.0.1 (a free port, a fresh database), sends a
bounded number of concurrent requests, then measures /healthz while a long job runs.

The mix: cached simulations (one request repeated), uncached ones (a new seed each: a new cache key, so a real
simulation in a worker process), invalid ones (422), ones too large to answer inline (413), jobs (202) and
preset reads. Prints throughput, p50 and p99 latency (ms), the count of each status and of 5xx (must be 0),
and the /healthz latency while the 1T example runs as a job, then while clients download its trace
(uncompressed: the server inflates it as it streams) and post 1 MB deeply nested bodies (goal: under 100 ms).
Exits 1 on any 5xx.

Run:  python bench/load_test.py [--requests 600] [--concurrency 16] [--workers 2] [--downloads 4]
                               [--nested-bodies 6]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"
LARGE = ROOT / "examples" / "gpt-1t-3072-a100.yaml"
# Out of every 20 requests: what each kind is.
MIX = (["cached"] * 8 + ["uncached"] * 4 + ["invalid"] * 3 + ["too_large"] * 2 + ["job"] * 2 + ["presets"])


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start_server(port: int, workers: int, database: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CLUSTERSIM_DATABASE": str(database), "CLUSTERSIM_WORKERS": str(workers)}
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1",
                                    "--port", str(port), "--log-level", "warning"],
                                   env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the server did not start; see " + str(log))


def make_request(kind: str, n: int, small: dict[str, Any], large: dict[str, Any]) -> tuple[str, str, Any]:
    """(method, path, JSON body) of the n-th request of a kind."""
    if kind == "cached":
        return "POST", "/v1/simulations", small
    if kind == "uncached":
        return "POST", "/v1/simulations", {**small, "options": {"seed": 1000 + n}}
    if kind == "invalid":
        bad = copy.deepcopy(small)
        bad["layout"]["dp"] = 3  # dp * tp * pp != GPUs
        return "POST", "/v1/simulations", bad
    if kind == "too_large":
        return "POST", "/v1/simulations", {**large, "options": {"fidelity": "full", "seed": n}}
    if kind == "job":
        return "POST", "/v1/jobs", {**small, "options": {"seed": 100_000 + n}}
    return "GET", "/v1/presets/models", None


async def run_load(url: str, total: int, concurrency: int) -> tuple[float, list[tuple[str, int, float]]]:
    small, large = load(SMALL), load(LARGE)
    gate = asyncio.Semaphore(concurrency)
    records: list[tuple[str, int, float]] = []
    counters: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await client.post("/v1/simulations", json=small)  # the entry the cached requests hit

        async def one(kind: str) -> None:
            counters[kind] += 1
            method, path, body = make_request(kind, counters[kind], small, large)
            async with gate:
                started = time.perf_counter()
                response = await client.request(method, path, json=body)
                records.append((kind, response.status_code, time.perf_counter() - started))

        kinds = list(itertools.islice(itertools.cycle(MIX), total))
        started = time.perf_counter()
        await asyncio.gather(*(one(kind) for kind in kinds))
        return time.perf_counter() - started, records


def healthz_during_long_job(url: str, pings: int) -> tuple[list[float], str]:
    with httpx.Client(base_url=url, timeout=30) as client:
        job = client.post("/v1/jobs", json={**load(LARGE), "options": {"seed": 424242}}).json()
        deadline = time.monotonic() + 30
        while client.get(f"/v1/jobs/{job['id']}").json()["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.02)
        latencies = []
        for _ in range(pings):
            started = time.perf_counter()
            client.get("/healthz").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
        status = client.get(f"/v1/jobs/{job['id']}").json()["status"]
    return latencies, status


def _wait_succeeded(client: httpx.Client, job_id: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (status := client.get(f"/v1/jobs/{job_id}").json()["status"]) != "succeeded":
        if status in ("failed", "cancelled", "timed_out") or time.monotonic() > deadline:
            raise SystemExit(f"the trace job ended {status}")
        time.sleep(0.2)


def healthz_during_downloads(url: str, pings: int, downloads: int, bodies: int) -> tuple[list[float], int, int]:
    """/healthz latencies while `downloads` clients fetch the 1T example's trace over and over (asking for it
    uncompressed, so the server inflates it) and `bodies` clients post 1 MB deeply nested bodies; returns the
    latencies, the traces downloaded and the bodies answered (and refused)."""
    with httpx.Client(base_url=url, timeout=600) as client:
        job = client.post("/v1/jobs", json={**load(LARGE), "options": {"seed": 515151}}).json()
        _wait_succeeded(client, job["id"], 900)
    stop = threading.Event()
    done = Counter[str]()
    nested = b"[" * 500_000 + b"]" * 499_999  # just under 1 MB, and unbalanced: refused either way

    def download() -> None:
        with httpx.Client(base_url=url, timeout=600, headers={"Accept-Encoding": "identity"}) as c:
            while not stop.is_set():
                with c.stream("GET", f"/v1/jobs/{job['id']}/trace") as response:
                    for _ in response.iter_raw(1 << 20):
                        pass
                done["traces"] += 1

    def post() -> None:
        with httpx.Client(base_url=url, timeout=600) as c:
            while not stop.is_set():
                c.post("/v1/simulations", content=nested, headers={"content-type": "application/json"})
                done["bodies"] += 1

    threads = [threading.Thread(target=download) for _ in range(downloads)]
    threads += [threading.Thread(target=post) for _ in range(bodies)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every load under way
    latencies = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(pings):
            started = time.perf_counter()
            client.get("/healthz").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join()
    return latencies, done["traces"], done["bodies"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600, help="requests in the load phase")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    parser.add_argument("--workers", type=int, default=2, help="the server's simulation processes")
    parser.add_argument("--pings", type=int, default=100, help="/healthz requests while the long job runs")
    parser.add_argument("--downloads", type=int, default=4, help="clients downloading the 1T trace at once")
    parser.add_argument("--nested-bodies", type=int, default=6, help="clients posting 1 MB nested bodies at once")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(port, args.workers, Path(folder) / "load.db", Path(folder) / "server.log")
        try:
            wall, records = asyncio.run(run_load(url, args.requests, args.concurrency))
            pings, job_status = healthz_during_long_job(url, args.pings)
            loaded, traces, bodies = healthz_during_downloads(url, args.pings, args.downloads, args.nested_bodies)
        finally:
            server.terminate()
            server.wait(30)

    latencies = [r[2] for r in records]
    by_kind: dict[str, list[float]] = defaultdict(list)
    for kind, _, seconds in records:
        by_kind[kind].append(seconds)
    statuses = Counter(r[1] for r in records)
    errors_5xx = sum(count for status, count in statuses.items() if status >= 500)
    print(f"load: {len(records)} requests, {args.concurrency} concurrent, {args.workers} workers, "
          f"{os.cpu_count()} CPUs: {wall:.2f} s, {len(records) / wall:.0f} requests/s")
    print(f"latency: p50 {percentile(latencies, 0.5) * 1e3:.1f} ms, p99 {percentile(latencies, 0.99) * 1e3:.1f} ms")
    for kind in sorted(by_kind):
        values = by_kind[kind]
        print(f"  {kind:<10} {len(values):>5}  p50 {percentile(values, 0.5) * 1e3:7.1f} ms  "
              f"p99 {percentile(values, 0.99) * 1e3:7.1f} ms")
    print("statuses: " + ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items())))
    print(f"5xx: {errors_5xx}")
    print(f"/healthz while the 1T job runs ({len(pings)} requests, job {job_status} at the end): "
          f"p50 {statistics.median(pings) * 1e3:.1f} ms, p99 {percentile(pings, 0.99) * 1e3:.1f} ms, "
          f"max {max(pings) * 1e3:.1f} ms (goal: under 100 ms)")
    print(f"/healthz while {args.downloads} clients download the 1T trace ({traces} downloads) and "
          f"{args.nested_bodies} post 1 MB nested bodies ({bodies} answered): "
          f"p50 {statistics.median(loaded) * 1e3:.1f} ms, p99 {percentile(loaded, 0.99) * 1e3:.1f} ms, "
          f"max {max(loaded) * 1e3:.1f} ms (goal: under 100 ms)")
    return 1 if errors_5xx else 0


if __name__ == "__main__":
    raise SystemExit(main())
