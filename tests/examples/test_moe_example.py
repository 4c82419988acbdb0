"""examples/moe: its README is current (written from the simulation of its three request files), and what it
says holds: EP across nodes waits longer on the all-to-all than EP inside a node, and on an NVL72 rack no byte
of it leaves the NVLink domain."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_scripts import load_file

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "moe" / "report.py"


def load() -> ModuleType:
    module = load_file(SCRIPT, "moe_example")
    return module


def test_readme_is_current() -> None:
    assert (SCRIPT.parent / "README.md").read_text(encoding="utf-8") == load().render(), (
        "stale: run python examples/moe/report.py")


def test_where_ep_lives() -> None:
    module = load()
    from api_schemas import load_request_file
    from service.convert import to_scenario
    from simcore import simulate

    scenarios = {name: to_scenario(load_request_file(str(SCRIPT.parent / f"{name}.yaml"))) for name, _ in module.CASES}
    exposed = {name: simulate(s).metrics.time_breakdown_s["ep_comm"] for name, s in scenarios.items()}
    assert exposed["ep64-across-nodes"] > 2 * exposed["ep8-in-node"] > 0
    assert module.off_domain_share(scenarios["ep64-nvl72"]) == 0
    assert module.off_domain_share(scenarios["ep64-across-nodes"]) == 56 / 64


def test_dualpipe_hides_part_of_the_all_to_all() -> None:
    """The README's pipeline rows: the same all-to-all busy time under both schedules, DualPipe's exposed part
    well under 1F1B's, a shorter step, and twice the expert weights per GPU."""
    module = load()
    from api_schemas import load_request_file
    from service.convert import to_scenario
    from simcore import simulate

    one, dual = (simulate(to_scenario(load_request_file(str(SCRIPT.parent / f"{name}.yaml")))).metrics
                 for name, _ in module.PIPELINES)
    assert dual.communication_s["ep"] == pytest.approx(one.communication_s["ep"], rel=1e-9)
    assert dual.time_breakdown_s["ep_comm"] < 0.5 * one.time_breakdown_s["ep_comm"]
    assert dual.iteration_time_s < one.iteration_time_s
    experts = [max(stage.memory.expert_weights for stage in m.stages) for m in (one, dual)]
    assert experts[1] == pytest.approx(2 * experts[0], rel=1e-9)
