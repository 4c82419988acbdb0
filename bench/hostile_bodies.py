"""Hostile bodies against a live server: starts `clustersim serve` on 127.0.0.1 (a free port, a fresh database),
runs clients that each post 980 KB bodies of `[[[[...` over and over (declared JSON, YAML, or no type at all,
which is read as YAML first), and measures /healthz meanwhile. Prints how long each body took to be refused
(p50, p99, max), the answers' statuses (all must be 422), and /healthz p50, p99 and max, quiet and under the
clients (goal: p99 under 100 ms). Exits 1 if any body got another answer than 422.

The clients are processes of their own and /healthz is asked from this one, so that the clients' own work does
not delay the pings here; they all share the machine's CPUs with the server.

Run:  python bench/hostile_bodies.py [--clients 6] [--seconds 20] [--bytes 980000] [--types json,yaml,none]
                                     [--workers 2] [--body nested|wide|keys]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load_test import free_port, percentile, start_server

TYPES = {"json": "application/json", "yaml": "application/yaml", "none": None}


def body_of(kind: str, size: int) -> bytes:
    """`size` bytes of a hostile body: brackets nested all the way, a flat list of values, or a mapping of keys."""
    if kind == "nested":
        return b"[" * size
    if kind == "wide":
        return (b"[" + b"0," * (size // 2))[:size - 1] + b"]"
    lines = b"".join(b"k%d: 0\n" % i for i in range(size // 6))
    return lines[:size]


def client(url: str, seconds: float, content_type: str | None, body: bytes) -> list[tuple[int, float]]:
    """Post `body` until `seconds` have passed; (status, seconds) of each answer."""
    headers = {"content-type": content_type} if content_type else {}
    answers: list[tuple[int, float]] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=60) as http:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            status = http.post("/v1/simulations", content=body, headers=headers).status_code
            answers.append((status, time.perf_counter() - started))
    return answers


def pings(url: str, seconds: float, every_s: float = 0.01) -> list[float]:
    """/healthz latencies (s), one request every `every_s`, for `seconds`."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=30) as http:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            http.get("/healthz").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(every_s)
    return latencies


def figures(values: list[float]) -> str:
    return (f"p50 {statistics.median(values) * 1e3:.1f} ms, p99 {percentile(values, 0.99) * 1e3:.1f} ms, "
            f"max {max(values) * 1e3:.1f} ms ({len(values)} requests)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=6, help="processes posting hostile bodies at once")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the clients post")
    parser.add_argument("--bytes", type=int, default=980_000, help="size of each body (the limit is 1,000,000)")
    parser.add_argument("--types", default="json,yaml,none", help="Content-Types the clients take in turn")
    parser.add_argument("--body", choices=["nested", "wide", "keys"], default="nested", help="what the body is")
    parser.add_argument("--workers", type=int, default=2, help="the server's simulation processes")
    args = parser.parse_args()
    types = [TYPES[name.strip()] for name in args.types.split(",")]
    body = body_of(args.body, args.bytes)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(port, args.workers, Path(folder) / "bench.db", Path(folder) / "server.log")
        try:
            quiet = pings(url, 3.0)
            with ProcessPoolExecutor(args.clients) as pool:
                runs = [pool.submit(client, url, args.seconds, types[i % len(types)], body)
                        for i in range(args.clients)]
                time.sleep(1.0)  # every client has started posting
                loaded = pings(url, args.seconds - 2.0)
                answers = [answer for run in runs for answer in run.result()]
        finally:
            server.terminate()
            server.wait(30)

    statuses = Counter(status for status, _ in answers)
    print(f"hostile bodies: {args.clients} clients x {len(body)}-byte {args.body} bodies "
          f"({args.types}) for {args.seconds:g} s; server with {args.workers} workers, {os.cpu_count()} CPUs")
    print(f"refusals: {figures([seconds for _, seconds in answers])}; statuses "
          + ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items())))
    print(f"/healthz quiet: {figures(quiet)}")
    print(f"/healthz under the clients: {figures(loaded)} (goal: p99 under 100 ms)")
    return 0 if set(statuses) == {422} else 1


if __name__ == "__main__":
    raise SystemExit(main())
