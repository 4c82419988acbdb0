"""The results cache never serves what other code computed: its key holds the package's version and the digest of
the simulator's code and data (service.provenance), so the same request hits before a change of either and misses
after it; and the digest covers the files that change results and changes with any byte of them."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT, request_doc
from fastapi.testclient import TestClient

from api_schemas import parse_request
from service import provenance
from service.http.admission import cache_key
from service.http.app import create_app
from service.settings import Settings


@pytest.fixture
def fresh_provenance() -> Iterator[None]:
    """package_version and code_digest computed again in the test, and again after it (their per-process caches)."""
    provenance.package_version.cache_clear()
    provenance.code_digest.cache_clear()
    yield
    provenance.package_version.cache_clear()
    provenance.code_digest.cache_clear()


def _post(client: TestClient, doc: dict[str, object]) -> tuple[str, dict[str, object]]:
    response = client.post("/v1/simulations", content=json.dumps(doc), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    return response.headers["x-clustersim-cache"], response.json()


def test_a_change_of_the_code_digest_is_a_cache_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = request_doc(seed=61)
    with TestClient(create_app(Settings(database=str(tmp_path / "cache.db"), workers=1)),
                    base_url="http://localhost") as client:
        assert _post(client, doc)[0] == "miss"
        assert _post(client, doc)[0] == "hit"
        monkeypatch.setattr(provenance, "code_digest", lambda: "0" * 64)  # as after an upgrade of the code
        outcome, result = _post(client, doc)
        assert outcome == "miss"
        assert _post(client, doc)[0] == "hit"  # stored under the new key
        monkeypatch.undo()
        assert _post(client, doc)[0] == "hit"  # the old entry is still there under the old key
    assert result["simulator"]["version"] == provenance.package_version()  # type: ignore[index]


def test_the_key_holds_the_version_and_the_code_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    request = parse_request(json.dumps(request_doc()), source="test")
    key = cache_key(request)
    assert cache_key(parse_request(json.dumps(request_doc()), source="test")) == key
    monkeypatch.setattr(provenance, "package_version", lambda: "99.0.0")
    assert cache_key(request) != key
    monkeypatch.undo()
    monkeypatch.setattr(provenance, "code_digest", lambda: "f" * 64)
    assert cache_key(request) != key


def test_the_digest_covers_the_code_and_data_that_change_results() -> None:
    names = [name for name, _ in provenance.source_files(provenance.SIMULATOR_CODE)]
    assert names == sorted(names) and len(names) == len(set(names))
    for expected in ("api_schemas/request.py", "topology/graph.py", "simcore/simulate.py", "simcore/cost/fitted.py",
                     "simcore/cost/parameters.py", "simcore/calibration/reference/training-runs.json",
                     "simcore/calibration/reference/collectives.json", "service/convert.py", "service/search.py"):
        assert expected in names
    assert not [n for n in names if "__pycache__" in n or not n.endswith((".py", ".json"))]
    assert not [n for n in names if n.startswith("service/") and n.removeprefix("service/") not in
                ("convert.py", "convert_cluster.py", "search.py", "search_limits.py")]
    assert provenance.code_digest() == provenance.digest_files(provenance.source_files(provenance.SIMULATOR_CODE))


def test_the_digest_changes_with_any_byte_and_any_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a.py", tmp_path / "b.json"
    first.write_text("X = 1\n")
    second.write_text('{"fit": 0.5}\n')
    files = [("pkg/a.py", first), ("pkg/b.json", second)]
    before = provenance.digest_files(files)
    assert provenance.digest_files(files) == before
    second.write_text('{"fit": 0.6}\n')  # a fitted parameter
    assert provenance.digest_files(files) != before
    second.write_text('{"fit": 0.5}\n')
    assert provenance.digest_files(files) == before
    assert provenance.digest_files([("pkg/c.py", first), ("pkg/b.json", second)]) != before  # renamed
    assert provenance.digest_files(files[:1]) != before  # removed
    # the boundary between files counts: moving a byte from one file to the next changes it
    first.write_text("X = 1\n{")
    second.write_text('"fit": 0.5}\n')
    assert provenance.digest_files(files) != before


def test_the_version_comes_from_the_installed_metadata_else_pyproject(monkeypatch: pytest.MonkeyPatch,
                                                                      fresh_provenance: None) -> None:
    assert provenance.package_version() == metadata.version("clustersim")

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    provenance.package_version.cache_clear()
    monkeypatch.setattr(metadata, "version", not_installed)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert provenance.package_version() == pyproject["version"]


def test_a_pyproject_of_another_project_or_none_gives_an_unknown_version(tmp_path: Path) -> None:
    assert provenance.source_tree_version(tmp_path / "pyproject.toml") == "0+unknown"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\nversion = "2.0"\n')
    assert provenance.source_tree_version(tmp_path / "pyproject.toml") == "0+unknown"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "clustersim"\nversion = "2.0"\n')
    assert provenance.source_tree_version(tmp_path / "pyproject.toml") == "2.0"
