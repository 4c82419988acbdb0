"""The service's settings: the database must name a file (an empty sqlite URL would be a database in memory,
losing every job at a restart), refused by the setting's name; `clustersim serve` says so and exits 2."""

from __future__ import annotations

import pytest
from conftest import run_cli
from pydantic import ValidationError

from service.settings import Settings


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
