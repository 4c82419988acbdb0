"""A search's worker processes end with the search: `clustersim search` killed with SIGKILL while its two
workers simulate (as a CI timeout or the out-of-memory killer does), the same search run from a process whose pool
uses a forkserver, `clustersim sweep` killed the same way, and Ctrl-C to the process group: each time its workers
are gone within 2 s, and nothing it started is left.

The search is bench/orphan_workers.py's (Llama-3-70B on 32 DGX H100 nodes, candidates of tens of seconds each);
processes are read from /proc, and the deadlines poll, so a loaded machine only makes the test slower."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
GOAL_S = 2.0  # every process the search started is gone this long after the signal


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("orphan_workers", ROOT / "bench" / "orphan_workers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")


@pytest.mark.parametrize(("way", "exit_code"), [("sigkill", -9), ("sigkill-forkserver", -9), ("sweep-sigkill", -9),
                                                  ("ctrl-c", 130)])
def test_no_worker_outlives_its_search(tmp_path: Path, way: str, exit_code: int) -> None:
    orphans = bench()
    # Polls up to 30 s for the processes to go, so a slow machine cannot fail it; the goal is asserted after.
    ending = orphans.measure(way, orphans.request_file(tmp_path), deadline_s=30.0)
    assert ending.started >= orphans.WORKERS  # the workers existed and were simulating when the signal came
    assert ending.left == [], f"processes left after {way}: {ending.left}"
    assert ending.exit_code == exit_code
    # The workers' end is the kernel's (SIGKILL at the parent's death) or the parent's (it kills them on Ctrl-C
    # before anything else), so it is quick however loaded the machine; the parent's own exit after Ctrl-C is
    # Python's clean-up and only has to happen within the deadline.
    assert ending.workers_s is not None and ending.workers_s < GOAL_S, ending
    assert ending.seconds is not None, ending
