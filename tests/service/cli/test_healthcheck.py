"""The container's health check (the Dockerfile's HEALTHCHECK command, run here outside docker against a real
`clustersim serve`): it follows the serving port, from --port or CLUSTERSIM_PORT, and never hard-codes 8000."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, free_port

from service.cli.healthcheck import serve_port


def _dockerfile_healthcheck() -> list[str]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK .*? CMD (\[.*\])\s*$", text, re.MULTILINE)
    assert match, "the Dockerfile has a HEALTHCHECK in exec form"
    command: list[str] = json.loads(match.group(1))  # the exec form is a JSON list of strings
    return command


def _run(command: list[str], pid: int) -> subprocess.CompletedProcess[str]:
    python = [sys.executable] if command[0] == "python" else [command[0]]
    return subprocess.run([*python, *command[1:], "--pid", str(pid)], capture_output=True, text=True, timeout=30,
                          cwd=ROOT)


def test_the_dockerfile_names_no_port_in_its_health_check() -> None:
    assert "8000" not in " ".join(_dockerfile_healthcheck())
    assert (ROOT / ".dockerignore").exists()


@pytest.mark.parametrize(("command_line", "env", "port"), [
    (["/usr/local/bin/python", "/usr/local/bin/clustersim", "serve", "--host", "0.0.0.0"], {}, 8000),
    (["/usr/local/bin/python", "/usr/local/bin/clustersim", "serve", "--host", "0.0.0.0"],
     {"CLUSTERSIM_PORT": "9123"}, 9123),
    (["clustersim", "serve", "--port", "9000"], {"CLUSTERSIM_PORT": "9123"}, 9000),
    (["clustersim", "serve", "--port=9001"], {}, 9001),
    (["clustersim", "simulate", "/data/run.yaml"], {}, None),
])
def test_the_port_is_the_one_serve_listens_on(monkeypatch: pytest.MonkeyPatch, command_line: list[str],
                                              env: dict[str, str], port: int | None) -> None:
    monkeypatch.delenv("CLUSTERSIM_PORT", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert serve_port(command_line) == port


@pytest.mark.slow
def test_the_health_check_passes_on_a_serving_process_and_fails_on_a_dead_port(start_server: Any,
                                                                               tmp_path: Path) -> None:
    command = _dockerfile_healthcheck()
    server = start_server()
    assert _run(command, server.process.pid).returncode == 0
    # A process whose command line says `serve --port P` with nothing listening on P: unhealthy.
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "serve", "--port",
                               str(free_port())])
    try:
        failed = _run(command, silent.pid)
        assert failed.returncode == 1 and "healthz" in failed.stderr
    finally:
        silent.kill()
        silent.wait()


def test_a_batch_command_has_nothing_to_check() -> None:
    batch = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "simulate", "x.yaml"])
    try:
        assert _run(_dockerfile_healthcheck(), batch.pid).returncode == 0
    finally:
        batch.kill()
        batch.wait()
