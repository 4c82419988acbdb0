"""A seeded mutation fuzzer of the HTTP service, as a hostile client would be: valid documents (a simulation, a
job, a comparison, a search) mutated at a random field into wrong types, huge and tiny numbers, NaN and
Infinity, unicode and surrogate escapes, long strings; and whole bodies that are deeply nested, over the size
limit, YAML bombs and tags, duplicate keys, invalid UTF-8; sent with odd content types, to odd paths, with odd
methods. Every request must be answered (no connection reset), below 500, and within its time limit.

    python bench/fuzz.py [--requests 10000] [--seed 1] [--url URL]   # starts its own server unless --url

The suite runs 2,000 of the same (tests/service/http/test_fuzz_hostile.py). Exits 1 on any 5xx, reset or late
answer.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent

# GPT-3 125M on 8 A100s: milliseconds to simulate, so the valid requests a mutation leaves are cheap.
SIMULATION: dict[str, Any] = {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                              "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 16}}
DOCUMENTS: dict[str, dict[str, Any]] = {
    "/v1/simulations": SIMULATION,
    "/v1/jobs": SIMULATION,
    "/v1/comparisons": {"requests": [SIMULATION, SIMULATION], "labels": ["a", "b"]},
    "/v1/searches": {"model": {"preset": "gpt3-125m"}, "cluster": {"preset": "dgx-a100", "num_gpus": 8},
                     "global_batch_size": 16, "space": {"tp": [1, 2], "pp": [1, 2], "zero_stage": [0]},
                     "bounds": {"max_candidates": 2}},
}
# The settings a fuzzed server runs under: small limits, so whatever is admitted is quick.
SERVER_SETTINGS = {"CLUSTERSIM_WORKERS": "2", "CLUSTERSIM_MAX_GPUS": "64", "CLUSTERSIM_MAX_MICROBATCHES": "64",
                   "CLUSTERSIM_MAX_INLINE_EVENTS": "20000", "CLUSTERSIM_MAX_JOB_EVENTS": "20000",
                   "CLUSTERSIM_JOB_TIMEOUT_S": "10", "CLUSTERSIM_INLINE_TIMEOUT_S": "10",
                   "CLUSTERSIM_MAX_BODY_BYTES": "200000", "CLUSTERSIM_MAX_SEARCH_CANDIDATES": "2",
                   "CLUSTERSIM_MAX_QUEUED_JOBS": "1000", "CLUSTERSIM_MAX_SEARCH_SPACE": "100000"}
# An answer later than this is a failure (the inline limit plus a margin for a loaded machine).
ANSWER_LIMIT_S = 30.0

HOSTILE_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**31, 2**53 + 1, 2**64, -(2**63), 10**30, 1e308, -1e308, 5e-324, -0.0, 0.5,
    "", "x", "1", "NaN", "\U0001f600 emoji", "\u202e\u200b rtl zero-width", "\x00", "a" * 100_000, "\ud800",
    "\udfff\ud800", "\ud83d\ude00", [], [1], [None] * 50, {}, {"a": 1}, {"preset": None}, [[[[[]]]]],
]
# Raw JSON texts that json.dumps would not write.
RAW_VALUES = ["NaN", "Infinity", "-Infinity", "1" + "0" * 5000, "1e99999", "-0", "0.0000000000000000000001",
              '"\\ud800"', '"\\ud83d\\ude00"', '"\\u0000"', "[" * 40 + "]" * 40]
CONTENT_TYPES = [None, "application/json", "application/yaml", "text/yaml", "application/x-yaml",
                 "application/vnd.api+json", "text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=xyz", "application/json; charset=latin-1", "image/png", ";;;",
                 "application/json; charset=utf-8", "APPLICATION/JSON", "\u00e9/\u00e9"]
PATHS = ["/v1/jobs/", "/v1/jobs/%00", "/v1/jobs/" + "a" * 5000, "/v1/jobs/..%2F..%2Fetc", "/v1/jobs/\u00e9t\u00e9",
         "/v1/jobs/x/trace", "/v1/jobs/x/result", "/v1/presets/nothing", "/v1/presets/gpus", "/v1", "/",
         "/healthz", "/readyz", "/openapi.json", "/v1/jobs?limit=0", "/v1/jobs?limit=101", "/v1/jobs?cursor=-1",
         "/v1/jobs?cursor=" + "9" * 40, "/v1/jobs?status=nope", "/v1/jobs?limit=abc", "/v1/simulations/x"]
METHODS = ["GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "POST"]


@dataclass
class Report:
    """What the fuzzer saw: statuses, and the requests that failed (5xx, reset, late)."""

    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    unsent: int = 0

    @property
    def failures(self) -> int:
        return len(self.server_errors) + len(self.resets) + len(self.late)

    def summary(self) -> str:
        total = sum(self.statuses.values()) + len(self.resets)
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        return (f"fuzz: {total} requests; statuses {statuses}\n"
                f"5xx: {len(self.server_errors)}, resets: {len(self.resets)}, answered past {ANSWER_LIMIT_S:g} s: "
                f"{len(self.late)}; slowest answer {self.slowest_s:.2f} s (and {self.unsent} that httpx cannot send, "
                "replaced)")


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    body: bytes | None
    headers: dict[str, str]
    what: str


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            yield from _paths(value, (*prefix, index))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


_MARK = "\u0000RAW\u0000"


def _mutated(rng: random.Random, doc: dict[str, Any]) -> tuple[str, str]:
    """A mutated document as JSON text (raw tokens spliced in where json.dumps cannot write them), and what."""
    out = copy.deepcopy(doc)
    path = rng.choice(list(_paths(out)))
    roll = rng.random()
    if roll < 0.15 and path:  # drop the field
        parent = out
        for part in path[:-1]:
            parent = parent[part]
        del parent[path[-1]]
        return json.dumps(out), f"drop {path}"
    if roll < 0.3:  # an unknown field beside it
        target = out
        for part in path:
            target = target[part]
        if isinstance(target, dict):
            target[rng.choice(["extra", "\ud800", "", "a" * 300, "layout", "__proto__"])] = rng.choice(HOSTILE_VALUES)
            return json.dumps(out), f"add a field at {path}"
    if roll < 0.45:
        raw = rng.choice(RAW_VALUES)
        text = json.dumps(_set(out, path, _MARK))
        return text.replace(json.dumps(_MARK), raw), f"{path} = {raw[:40]}"
    value = rng.choice(HOSTILE_VALUES)
    return json.dumps(_set(out, path, value)), f"{path} = {str(value)[:40]!r}"


def _whole_body(rng: random.Random) -> tuple[bytes, str]:
    kind = rng.randrange(9)
    if kind == 0:
        depth = rng.choice([40, 1000, 100_000])
        return ("[" * depth + "]" * depth).encode(), f"nested {depth}"
    if kind == 1:
        return ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 200))).encode(), "yaml block nesting"
    if kind == 2:
        lines = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]
        return "\n".join(lines).encode(), "yaml bomb"
    if kind == 3:
        tag = rng.choice(["!!python/object/apply:os.system [ls]", "!!python/name:os.system", "!!binary AAAA",
                          "!custom x", "!!set {a, b}", "!!omap [a: 1]"])
        return f"model: {tag}\n".encode(), "yaml tag"
    if kind == 4:
        return b'{"model": {"preset": "gpt3-125m"}, "model": {}}', "duplicate key"
    if kind == 5:
        return bytes(rng.randrange(256) for _ in range(rng.choice([1, 10, 1000]))), "random bytes"
    if kind == 6:
        return b"x" * 300_000, "over the body limit"
    if kind == 7:
        return b"a: &a [*a]\n", "recursive alias"
    return b"\xff\xfe" + json.dumps(SIMULATION).encode("utf-16-le"), "utf-16"


def cases(seed: int) -> Iterator[Case]:
    """An endless, seeded stream of hostile requests."""
    rng = random.Random(seed)
    while True:
        roll = rng.random()
        route = rng.choice(list(DOCUMENTS))
        content_type = rng.choice(CONTENT_TYPES) if rng.random() < 0.3 else "application/json"
        if roll < 0.6:
            text, what = _mutated(rng, DOCUMENTS[route])
            body = text.encode("utf-8", "surrogatepass")
        elif roll < 0.8:
            body, what = _whole_body(rng)
        elif roll < 0.9:
            path = rng.choice(PATHS)
            yield Case(rng.choice(METHODS), path, None, {}, f"{path}")
            continue
        else:
            body, what = json.dumps(DOCUMENTS[route]).encode(), "valid"
            if rng.random() < 0.5:
                route = rng.choice(PATHS)
            yield Case(rng.choice(METHODS), route, body, {"content-type": "application/json"}, what)
            continue
        headers = {"content-type": content_type} if content_type else {}
        if rng.random() < 0.05:
            headers["host"] = rng.choice(["evil.example", "localhost", "[::1]", "127.0.0.1:1"])
        if rng.random() < 0.05:
            headers["origin"] = rng.choice(["null", "https://evil.example", "http://localhost"])
        yield Case("POST", route, body, headers, f"{route} {what} ({content_type})")


def run(base_url: str, requests: int, seed: int = 1, progress: Callable[[int], None] | None = None) -> Report:
    """Send `requests` fuzzed requests to the server at `base_url`, one at a time on a keep-alive connection."""
    report = Report()
    client = httpx.Client(base_url=base_url, timeout=ANSWER_LIMIT_S * 2)
    try:
        stream = cases(seed)
        n = 0
        while n < requests:  # requests sent: one this client cannot send is replaced by the next
            case = next(stream)
            started = time.perf_counter()
            try:
                response = client.request(case.method, case.path, content=case.body, headers=case.headers)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError) as err:
                n += 1
                report.resets.append(f"{case.method} {case.what}: {type(err).__name__}")
                client.close()
                client = httpx.Client(base_url=base_url, timeout=ANSWER_LIMIT_S * 2)
                continue
            except httpx.TimeoutException:
                n += 1
                report.late.append(f"{case.method} {case.what}: no answer")
                continue
            except (httpx.LocalProtocolError, UnicodeEncodeError):  # this client cannot send it: not sent
                report.unsent += 1
                continue
            n += 1
            took = time.perf_counter() - started
            report.slowest_s = max(report.slowest_s, took)
            report.statuses[response.status_code] += 1
            if response.status_code >= 500:
                report.server_errors.append(f"{case.method} {case.what}: {response.status_code} {response.text[:200]}")
            if took > ANSWER_LIMIT_S:
                report.late.append(f"{case.method} {case.what}: {took:.1f} s")
            if progress is not None and n % 500 == 0:
                progress(n)
    finally:
        client.close()
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--url", help="a running server (default: start one with small limits)")
    args = parser.parse_args()
    process = None
    url = args.url
    folder = tempfile.mkdtemp(prefix="clustersim-fuzz-")
    if url is None:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, **SERVER_SETTINGS, "CLUSTERSIM_DATABASE": str(Path(folder) / "fuzz.db")}
        log = (Path(folder) / "server.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1",
                                    "--port", str(port), "--log-level", "warning"],
                                   env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not start; see {folder}/server.log")
            time.sleep(0.1)
    try:
        report = run(url, args.requests, args.seed, lambda n: print(f"  {n} requests", file=sys.stderr, flush=True))
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
    print(report.summary())
    for line in (report.server_errors + report.resets + report.late)[:20]:
        print("  " + line)
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
