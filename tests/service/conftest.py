"""Shared helpers for the service tests: request documents, and a real server as a subprocess
(`clustersim serve` on 127.0.0.1, a free port, its own database), always stopped at the end. Every database a
test opens is under a temporary directory: tests name one, and the default (the user's data directory) is
pointed at a temporary one for the whole session."""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from bench_scripts import load_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SMALL = EXAMPLES / "bubble-vs-microbatches" / "m8.yaml"  # 64 GPUs, 8 microbatches: about 10 ms
LARGE = ROOT / "tests" / "service" / "data" / "long-1t.yaml"  # the 1T example, every period simulated: seconds


@pytest.fixture(scope="session", autouse=True)
def default_database_in_a_temporary_directory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The default database (service.settings.default_database) under a temporary XDG_DATA_HOME, and no
    CLUSTERSIM_DATABASE from the environment: a test never writes the user's database or one in the tree."""
    data = tmp_path_factory.mktemp("xdg-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_DATA_HOME", str(data))
        patch.delenv("CLUSTERSIM_DATABASE", raising=False)
        yield data


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run `clustersim ARGV` in process; (exit code, stdout, stderr). Usage errors raise SystemExit(2)."""
    from service.cli.main import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def load_script(path: Path) -> Any:
    """Import an example's script (a file, not a package module) so a test can call its functions."""
    return load_file(path, f"example_{path.parent.name.replace('-', '_')}")


def assert_cli_refuses(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: dict[str, Any], field: str,
                       rule: str) -> None:
    """`clustersim simulate` on the document exits 2 with a message naming the field and the rule."""
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, _, err = run_cli(capsys, "simulate", str(path))
    assert code == 2, err
    assert field in err and rule in err, err


def assert_http_refuses(tmp_path: Path, doc: dict[str, Any], field: str, rule: str) -> None:
    """POST /v1/simulations with the document answers 422 with a detail naming the field and the rule."""
    from fastapi.testclient import TestClient

    from service.http.app import create_app
    from service.settings import Settings

    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as client:
        response = client.post("/v1/simulations", content=json.dumps(doc), headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    details = response.json()["error"]["details"]
    assert any(d["field"] == field and rule in d["rule"] for d in details), details


def with_field(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of a request document with the field at a dotted path set."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def request_doc(path: Path = SMALL, **options: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    if options:
        data.setdefault("options", {}).update(options)
    return data


def descendants(pid: int) -> list[int]:
    """Every live (not zombie) process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pids: list[int]) -> list[int]:
    """The pids that still run (not gone, not zombies)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`clustersim serve` in a subprocess; `url` once ready."""

    # Generous: ready in about 3 s on a quiet machine, 22-25 s on a 2-core one at load 7.
    def __init__(self, database: Path, log: Path, ready_timeout_s: float = 180.0, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "CLUSTERSIM_DATABASE": str(database), **env}
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "warning"],
            env=environ, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(ROOT))
        self._wait_ready(ready_timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the server did not become ready in time")

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers run. Waited for with a generous deadline: a killed process is reaped at
        once, but a loaded machine may take seconds to schedule it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(60)
        self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Any]:
    """A factory of servers on one database (tmp_path/jobs.db); every one is stopped at teardown."""
    servers: list[Server] = []

    def start(**env: str) -> Server:
        server = Server(tmp_path / "jobs.db", tmp_path / "server.log", **env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
