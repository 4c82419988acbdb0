"""The seeded mutation fuzzer of bench/fuzz.py against a real server, 2,000 requests (the bench sends 10,000):
wrong types, huge and tiny numbers, NaN and Infinity, unicode and surrogate escapes, deep nesting, huge bodies,
YAML bombs and tags, duplicate keys, odd content types, paths and methods. No answer is a 5xx, no connection is
reset, every answer comes within its limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from bench_scripts import load
from conftest import Server

REQUESTS = 2_000


def _fuzz() -> ModuleType:
    module = load("fuzz")
    return module


fuzz = _fuzz()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder: Path = tmp_path_factory.mktemp("fuzz-hostile")
    running = Server(folder / "fuzz.db", folder / "server.log", **fuzz.SERVER_SETTINGS)
    yield running
    running.stop()


@pytest.mark.slow
def test_hostile_requests_get_no_5xx_no_reset_and_an_answer_in_time(server: Server) -> None:
    report = fuzz.run(server.url, REQUESTS, seed=20)
    assert sum(report.statuses.values()) + len(report.resets) == REQUESTS
    assert report.failures == 0, report.summary() + "\n" + "\n".join(
        report.server_errors + report.resets + report.late)
    assert len(report.statuses) >= 8  # the stream reaches many kinds of answer, not one refusal
