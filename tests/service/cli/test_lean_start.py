"""The command line starts lean: `--help` and the parser import neither the simulator nor its documents, and a
simulation that draws no picture never imports matplotlib (python -X importtime showed them to be most of the
start-up). Checked in a fresh interpreter, by the modules it ends up with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("matplotlib", "pydantic", "networkx", "numpy", "yaml", "simcore", "api_schemas", "fastapi")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_the_parser_imports_nothing_heavy() -> None:
    loaded = _modules_after("from service.cli.main import build_parser\nbuild_parser()")
    assert not {name for name in loaded if name.split(".")[0] in HEAVY}


def test_a_simulation_without_a_picture_does_not_import_matplotlib() -> None:
    request = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"
    code = ("import contextlib, io\nfrom service.cli.main import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['simulate', {str(request)!r}])")
    loaded = _modules_after(code)
    assert "simcore" in loaded and "matplotlib" not in loaded


def test_a_simulation_imports_no_settings_search_or_result_models() -> None:
    """With no CLUSTERSIM_* variable set the CLI's limits are the defaults, read without pydantic-settings; the
    executors (process pools), the search documents and space, and the result models are left out."""
    request = ROOT / "examples" / "bubble-vs-microbatches" / "m8.yaml"
    code = ("import contextlib, io, os\nfrom service.cli.main import main\n"
            "for name in [n for n in os.environ if n.upper().startswith('CLUSTERSIM_')]:\n    del os.environ[name]\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    main(['simulate', {str(request)!r}])")
    loaded = _modules_after(code)
    assert "simcore" in loaded
    assert not loaded & {"pydantic_settings", "service.settings", "service.executors.pool",
                         "simcore.planning.space", "api_schemas.search", "api_schemas.result", "concurrent.futures"}


def test_the_default_limits_are_the_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from service.limits import default_job_limits
    from service.settings import Settings

    for name in [n for n in os.environ if n.upper().startswith("CLUSTERSIM_")]:
        monkeypatch.delenv(name)
    assert default_job_limits() == Settings().limits(inline=False)
