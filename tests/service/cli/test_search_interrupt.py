"""Ctrl-C in the middle of a search returns the best of what had been simulated: in the search itself (the
interrupt arriving while results come back), and from `clustersim search` given SIGINT on its process group as a
terminal's Ctrl-C sends it: exit 130, the tables of the layouts simulated so far, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simcore import MODEL_PRESETS, NODE_PRESETS, Layout, Scenario, model_from_fields, sized
from simcore.planning.search import Bounds, StoppedBy, search
from simcore.planning.space import Space

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

BASE = Scenario(model=model_from_fields(MODEL_PRESETS["gpt3-350m"]), cluster=sized(NODE_PRESETS["dgx-a100"], 8),
                layout=Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=16))


def test_an_interrupted_search_returns_the_best_simulated_so_far() -> None:
    seen = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == 3:
            raise KeyboardInterrupt

    result = search(BASE, 16, Space(max_microbatch_size=2), Bounds(max_candidates=None, exhaustive=True),
                    progress=progress)
    assert result.stopped_by is StoppedBy.INTERRUPTED and result.simulated == 3
    assert result.best is not None and len(result.plan.candidates) > 3


def test_an_interrupt_before_any_result_is_an_interrupt() -> None:
    def progress(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        search(BASE, 16, Space(max_microbatch_size=2), Bounds(max_candidates=None), progress=progress)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
def test_ctrl_c_prints_the_best_so_far_and_exits_130(tmp_path: Path) -> None:
    # Hundreds of layouts of a small model, every one simulated: planning takes a second, and the search cannot
    # end before the interrupt however fast the machine.
    request = tmp_path / "search.json"
    request.write_text(json.dumps({"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100",
                                   "num_nodes": 8}, "global_batch_size": 512}))
    command = [sys.executable, "-m", "service.cli.main", "search", str(request), "--exhaustive",
               "--max-candidates", "100000", "--workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, cwd=Path(__file__).resolve().parents[3],
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a shell leaves it
    time.sleep(12)
    assert process.poll() is None, process.communicate()
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert "stopped by: interrupted" in out and "Best:" in out
