"""examples/long-context: at 128K tokens a sample and beyond the fastest layout uses context parallelism (and beats
the fastest without it); at 8K it does not. The README is what report.py writes from the shipped best layouts."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_scripts import load_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "long-context"


def report_module() -> ModuleType:
    module = load_file(EXAMPLE / "report.py", "long_context_report")
    return module


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    return report_module().results()  # type: ignore[no-any-return]


def test_cp_pays_from_128k_and_not_at_8k(rows: dict[str, dict[str, Any]]) -> None:
    report = report_module()
    assert report.cp_of(rows, 8192) == 1
    for length in (131072, 524288, 1048576):
        assert report.cp_of(rows, length) > 1
        assert report.pays(rows, length) > 1.0 + report.TIE
        assert rows[f"{report.label(length)}-cp"]["memory"]["fits"]
    for length in report.LENGTHS:  # the searches without CP found no CP
        assert rows[f"{report.label(length)}-no-cp"]["request"]["layout"].get("cp", 1) == 1


def test_the_readme_is_current() -> None:
    assert report_module().main(["--check"]) == 0, "rerun: python examples/long-context/report.py"
