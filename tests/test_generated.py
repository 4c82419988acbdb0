"""bench/generated.py (README tooling, not shipped in the package): write_or_check writes the text, or with --check
reports a stale file without touching it; between_markers replaces what lies between two marker lines and nothing
else."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_scripts import load

GENERATED = load("generated")
between_markers, write_or_check, write_or_check_between = (
    GENERATED.between_markers, GENERATED.write_or_check, GENERATED.write_or_check_between)


def test_write_then_check_then_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "example" / "README.md"
    readme.parent.mkdir()
    assert write_or_check(readme, "figures 1\n", [], "python report.py") == 0
    assert readme.read_text(encoding="utf-8") == "figures 1\n"
    assert write_or_check(readme, "figures 1\n", ["--check"], "python report.py") == 0
    capsys.readouterr()
    assert write_or_check(readme, "figures 2\n", ["--check"], "python report.py") == 1
    assert "example/README.md is stale: run python report.py" in capsys.readouterr().out
    assert readme.read_text(encoding="utf-8") == "figures 1\n"  # --check writes nothing


def test_check_of_a_missing_file_is_stale(tmp_path: Path) -> None:
    assert write_or_check(tmp_path / "README.md", "x", ["--check"], "python report.py") == 1
    assert not (tmp_path / "README.md").exists()


def test_between_markers_replaces_only_the_block() -> None:
    text = "intro\n<!-- a -->\nold\nlines\n<!-- b -->\noutro\n"
    assert between_markers(text, "new", "<!-- a -->", "<!-- b -->") == "intro\n<!-- a -->\nnew\n<!-- b -->\noutro\n"
    fresh = between_markers(text, "new", "<!-- a -->", "<!-- b -->")
    assert between_markers(fresh, "new", "<!-- a -->", "<!-- b -->") == fresh  # writing twice changes nothing
    with pytest.raises(ValueError, match="<!-- c -->"):
        between_markers(text, "new", "<!-- c -->", "<!-- b -->")


def test_write_or_check_between_writes_only_when_asked(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- a -->\nold\n<!-- b -->\n", encoding="utf-8")
    assert write_or_check_between(readme, "new", "<!-- a -->", "<!-- b -->", []) == 0
    assert "old" in readme.read_text(encoding="utf-8")  # neither flag: nothing written
    assert write_or_check_between(readme, "new", "<!-- a -->", "<!-- b -->", ["--check"]) == 1
    assert write_or_check_between(readme, "new", "<!-- a -->", "<!-- b -->", ["--write"]) == 0
    assert readme.read_text(encoding="utf-8") == "a\n<!-- a -->\nnew\n<!-- b -->\n"
    assert write_or_check_between(readme, "new", "<!-- a -->", "<!-- b -->", ["--check"]) == 0
