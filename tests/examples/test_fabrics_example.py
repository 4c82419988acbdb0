"""examples/fabrics: its graphs are what `clustersim topology` writes and its README is current (written from the
simulation of its request files), and what it says holds: the expert all-to-all and the tree all-reduce slow
down as the fat tree's uplinks thin out (and further with a spine failed), the ring and the TP-in-server
pipeline do not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from api_schemas import load_request_file
from service.python_api import simulate

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "examples" / "fabrics"


@pytest.mark.slow
def test_graphs_and_readme_are_current() -> None:
    done = subprocess.run([sys.executable, str(HERE / "report.py"), "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, "stale: run python examples/fabrics/report.py\n" + done.stderr


def test_what_crosses_the_spines_slows_down_and_nothing_else() -> None:
    def run(stem: str) -> tuple[float, dict[str, float]]:
        result = simulate(load_request_file(str(HERE / f"{stem}.yaml")))
        return result.iteration_time_s, result.time_breakdown_s.model_dump()

    moe = [run(f"moe-ep64-{r}") for r in ("1to1", "2to1", "4to1", "4to1-spine0-failed")]
    assert moe[0][1]["ep_comm"] < moe[1][1]["ep_comm"] < moe[2][1]["ep_comm"] < moe[3][1]["ep_comm"]
    assert moe[2][1]["ep_comm"] > 2 * moe[0][1]["ep_comm"]
    tree = [run(f"dp128-tree-{r}") for r in ("1to1", "2to1")]
    assert tree[1][1]["dp_comm"] > 1.5 * tree[0][1]["dp_comm"] > 0
    assert run("dp128-ring-1to1") == run("dp128-ring-2to1")
    assert run("tp8-pp16-1to1") == run("tp8-pp16-4to1")
