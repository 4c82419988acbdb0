"""examples/cost-to-train: its README is current (written from the simulation of its two request files), and its
figures are the whole-run closed forms of those simulations."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_script

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore import simulate

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "cost-to-train" / "plan.py"


def test_readme_is_current() -> None:
    module = load_script(SCRIPT)
    assert (SCRIPT.parent / "README.md").read_text(encoding="utf-8") == module.render(), (
        "stale: run python examples/cost-to-train/plan.py")


@pytest.mark.parametrize("model", ["gpt-100b", "t5-100b"])
def test_the_run_is_twenty_tokens_per_parameter_at_the_simulated_rate(model: str) -> None:
    scenario = to_scenario(load_request_file(str(SCRIPT.parent / f"{model}.yaml")))
    outcome = simulate(scenario)
    run = outcome.training
    assert run is not None and scenario.cluster.num_gpus == 1024
    assert run.tokens == pytest.approx(20 * scenario.model.total_parameters(), rel=1e-12)
    days = run.tokens / outcome.metrics.tokens_per_s / 86_400
    assert run.without_failures.days == pytest.approx(days, rel=1e-9)
    assert run.without_failures.cost_usd == pytest.approx(2.0 * days * 24 * 1024, rel=1e-9)
    assert outcome.metrics.mfu > 0.4 and outcome.warnings == ()
