"""Figures the documentation's prose (README.md and docs/*.md) quotes outside its generated blocks, recomputed from
the current code: a change that moves one fails here, naming the text to update (the generated blocks are
tests/test_readme_checks.py's)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from bench_scripts import load

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore import Fidelity, simulate
from simcore.cost.parameters import LINK_EFFICIENCY
from simcore.simulate import Outcome

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
DOCS = load("doc_sections").all_text()
ONE_T = ROOT / "examples" / "gpt-1t-3072-a100.yaml"


def quoted(text: str) -> None:
    """`text` appears in README.md or a file of docs/ (line breaks there read as spaces)."""
    if text not in DOCS:
        pytest.fail(f"the documentation (README.md, docs/*.md) should say: {text}")


@pytest.fixture(scope="module")
def one_t() -> Outcome:
    return simulate(to_scenario(load_request_file(str(ONE_T))))


def test_the_1t_example_figures(one_t: Outcome) -> None:
    quoted(f"{one_t.events:,} events). Finding")
    scenario = to_scenario(load_request_file(str(ONE_T)))
    m, pp = scenario.layout.num_microbatches, scenario.layout.pp
    simulated = m - one_t.extrapolated_periods  # a 1F1B period is one microbatch's forward and backward
    quoted(f"({simulated} of the {m} microbatches: the pipeline's fill and drain on {pp} stages stay, most of its "
           f"{simulated * 2 * pp:,} passes)")
    quoted(f"pipeline busy time ({one_t.metrics.communication_s['pp']:.2f} s summed over {pp} stages)")


def test_the_1t_example_at_full_fidelity(one_t: Outcome) -> None:
    full = simulate(replace(to_scenario(load_request_file(str(ONE_T))), fidelity=Fidelity.FULL))
    quoted(f"(every replica simulated, {full.events:,} events)")
    gap = abs(full.metrics.iteration_time_s / one_t.metrics.iteration_time_s - 1)
    quoted(f"the two fidelities differ by {gap:.1e} relative".replace("e-0", "e-"))


def test_the_golden_set_sizes() -> None:
    golden = json.loads((ROOT / "tests" / "golden" / "golden.json").read_text(encoding="utf-8"))
    script = load("golden_results")
    quoted(f"simulates {len(golden)} request documents")
    quoted(f"runs the full set of {len(script.documents())} requests")


def test_the_link_efficiencies() -> None:
    quoted(f"({LINK_EFFICIENCY['nvlink']:.0%} NVLink, {LINK_EFFICIENCY['ib']:.0%} InfiniBand)")
