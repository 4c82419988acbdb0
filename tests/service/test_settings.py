"""The service's settings: the database must name a file (an empty sqlite URL would be a database in memory,
losing every job at a restart), refused by the setting's name; `clustersim serve` says so and exits 2. Without
CLUSTERSIM_DATABASE the database is in the user's data directory, created on demand, never the working
directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import request_doc, run_cli
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.http.app import create_app
from service.settings import Settings, default_database


@pytest.mark.parametrize("value", ["sqlite://", "sqlite:///", ""])
def test_a_database_url_without_a_path_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(database=value)
    [error] = caught.value.errors()
    assert error["loc"] == ("database",)
    assert "CLUSTERSIM_DATABASE" in error["msg"] and "names no file" in error["msg"]


@pytest.mark.parametrize(("value", "path"), [("jobs.db", "jobs.db"), ("sqlite:///jobs.db", "jobs.db"),
                                             ("sqlite:////var/lib/cs/jobs.db", "/var/lib/cs/jobs.db")])
def test_a_database_path_or_url_names_its_file(value: str, path: str) -> None:
    assert Settings(database=value).database_path() == path


def test_serve_with_an_empty_database_url_exits_2_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLUSTERSIM_DATABASE", "sqlite://")
    code, out, err = run_cli(capsys, "serve", "--port", "0")
    assert code == 2 and out == ""
    assert err.startswith("clustersim: invalid setting: database: CLUSTERSIM_DATABASE: sqlite:// names no file")
    assert len(err.strip().splitlines()) == 1


def test_the_default_database_is_in_the_users_data_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert Settings().database_path() == str(tmp_path / "data" / "clustersim" / "clustersim.db")
    monkeypatch.setenv("CLUSTERSIM_DATABASE", str(tmp_path / "mine.db"))
    assert Settings().database_path() == str(tmp_path / "mine.db")


@pytest.mark.parametrize("xdg", [None, "", "relative/data"])
def test_without_an_absolute_xdg_data_home_it_is_under_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   xdg: str | None) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:  # a relative XDG_DATA_HOME is ignored (the XDG base directory rule)
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    assert default_database() == str(tmp_path / ".local" / "share" / "clustersim" / "clustersim.db")


def test_the_service_creates_its_default_database_there_and_writes_nothing_in_the_working_directory(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    with TestClient(create_app(Settings(workers=1)), base_url="http://localhost") as client:
        response = client.post("/v1/simulations", content=json.dumps(request_doc()),
                               headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
    assert (data / "clustersim" / "clustersim.db").is_file()
    assert list(work.iterdir()) == []
