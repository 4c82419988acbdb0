"""Progress while the engine runs (simulate's `progress` callback): the compute passes finished over the passes of
the iteration, exact totals, only growing, ending at the total, and never changing a result."""

from __future__ import annotations

import pytest

from simcore.domain.layout import Fidelity, Layout, Schedule
from simcore.domain.model import model_from_fields
from simcore.engine.pipeline import PROGRESS_STEPS
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

MODEL = model_from_fields({"architecture": "decoder_only", "num_layers": 8, "hidden_size": 1024,
                           "num_attention_heads": 16, "vocab_size": 1024, "seq_length": 512})


@pytest.mark.parametrize(("layout", "fidelity", "replicas"), [
    (Layout(dp=2, tp=1, pp=4, microbatch_size=1, global_batch_size=32), Fidelity.REPRESENTATIVE, 1),
    (Layout(dp=2, tp=1, pp=4, microbatch_size=1, global_batch_size=32), Fidelity.FULL, 2),
    (Layout(dp=2, tp=1, pp=4, microbatch_size=1, global_batch_size=16, schedule=Schedule.INTERLEAVED_1F1B,
            virtual_stages=2, zero_stage=0), Fidelity.REPRESENTATIVE, 1),
    (Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16, zero_stage=3), Fidelity.REPRESENTATIVE, 1),
])
def test_progress_counts_every_pass_once_and_changes_nothing(layout: Layout, fidelity: Fidelity,
                                                              replicas: int) -> None:
    scenario = Scenario(MODEL, sized(NODE_PRESETS["dgx-a100"], 8), layout, fidelity=fidelity)
    seen: list[tuple[int, int]] = []
    observed = simulate(scenario, progress=lambda done, total: seen.append((done, total)))
    plain = simulate(scenario)
    assert observed.metrics == plain.metrics and observed.events == plain.events
    total = 2 * layout.num_microbatches * layout.virtual_stages * layout.pp * replicas  # forward + backward
    assert {t for _, t in seen} == {total}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == total and done[0] >= 0
    assert len(set(done)) >= min(total, 5)  # reported along the way, not only at the end
    assert len(seen) <= 4 * PROGRESS_STEPS  # and not on every call of the clock
