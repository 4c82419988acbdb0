"""A search's worker processes end with the search: `clustersim search` killed with SIGKILL while its two
workers simulate (as a CI timeout or the out-of-memory killer does), the same search run from a process whose pool
uses a forkserver, `clustersim sweep` killed the same way, and Ctrl-C to the process group: each time its workers
are gone within 2 s, and nothing it started is left. The same for `clustersim search --executor ray` killed with
SIGKILL or Ctrl-C while two Ray workers run its tasks: every process of its local Ray runtime (keeper, GCS server,
raylet, dashboard, monitors, agents, workers) is gone within 2 s.

The search is bench/orphan_workers.py's (Llama-3-70B on 32 DGX H100 nodes, candidates of tens of seconds each);
processes are read from /proc, and the deadlines poll, so a loaded machine only makes the test slower."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from bench_scripts import load

GOAL_S = 2.0  # every process the search started is gone this long after the signal


def bench() -> ModuleType:
    module = load("orphan_workers")
    return module


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")


def ray_can_start() -> str | None:
    """Why a Ray runtime cannot start here (None: it can, as far as can be told before starting one)."""
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (the ray extra: pip install 'clustersim[ray]')"
    return None


RAY = pytest.mark.skipif(ray_can_start() is not None, reason=str(ray_can_start()))


@pytest.mark.parametrize(("way", "exit_code"), [
    ("sigkill", -9), ("sigkill-forkserver", -9), ("sweep-sigkill", -9), ("ctrl-c", 130),
    pytest.param("ray-sigkill", -9, marks=RAY), pytest.param("ray-ctrl-c", 130, marks=RAY)])
def test_no_worker_outlives_its_search(tmp_path: Path, way: str, exit_code: int) -> None:
    orphans = bench()
    # Polls up to 30 s for the processes to go, so a slow machine cannot fail it; the goal is asserted after.
    try:
        request = orphans.request_file(tmp_path)
        ending = orphans.measure(way, request, deadline_s=30.0)
    except RuntimeError as err:
        if way.startswith("ray-") and "the local Ray runtime did not start" in str(err):
            pytest.skip(f"Ray cannot start here: {err}")  # installed, but this machine does not let it run
        raise
    assert ending.started >= orphans.WORKERS  # the workers existed and were simulating when the signal came
    assert ending.left == [], f"processes left after {way}: {ending.left}"
    stderr = orphans.stderr_file(request).read_text(errors="replace")[-2000:]
    assert ending.exit_code == exit_code, f"exit {ending.exit_code} after {way}; its stderr ended:\n{stderr}"
    # The workers' end is the kernel's (SIGKILL at the parent's death) or the parent's (it kills them on Ctrl-C
    # before anything else), so it is quick however loaded the machine; the parent's own exit after Ctrl-C is
    # Python's clean-up and only has to happen within the deadline.
    assert ending.workers_s is not None and ending.workers_s < GOAL_S, ending
    assert ending.seconds is not None, ending
