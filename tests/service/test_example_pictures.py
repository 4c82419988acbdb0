"""The pictures the examples' READMEs show are current: drawn again from fresh simulations, they draw the same
results as when committed (always), and are the same bytes (with the matplotlib version that drew them)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from bench_scripts import load_file

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RERUN = "rerun: python examples/pictures.py"


def test_example_pictures_are_current(tmp_path: Path) -> None:
    pictures = load_file(EXAMPLES / "pictures.py", "example_pictures")
    committed = json.loads((EXAMPLES / "pictures.json").read_text(encoding="utf-8"))
    fresh = pictures.make(tmp_path)
    assert fresh["pictures"].keys() == committed["pictures"].keys(), RERUN
    same_matplotlib = fresh["matplotlib"] == committed["matplotlib"]
    for name, entry in committed["pictures"].items():
        on_disk = hashlib.sha256((EXAMPLES / name).read_bytes()).hexdigest()
        assert on_disk == entry["file_sha256"], f"{name} is not the file pictures.json records; {RERUN}"
        assert fresh["pictures"][name]["data_sha256"] == entry["data_sha256"], \
            f"{name} draws results that the simulator no longer gives; {RERUN}"
        if same_matplotlib:
            assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), f"{name} is stale; {RERUN}"
    # every picture is shown by its example's README, and every picture a README shows exists
    for folder in {Path(name).parent for name in committed["pictures"]}:
        readme = (EXAMPLES / folder / "README.md").read_text(encoding="utf-8")
        shown = set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme))
        assert shown == {Path(n).name for n in committed["pictures"] if Path(n).parent == folder}
