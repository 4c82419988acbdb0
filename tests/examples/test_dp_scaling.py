"""examples/dp-scaling: the Megatron 2020 weak-scaling efficiencies, simulated, within 5 points of the published
ones (93%, 86%, 79%, 73% at 128, 256, 512 and 1024 GPUs), and the loss grows with the data-parallel traffic.
Apart: TP efficiency (one replica over the 1-GPU run) and DP efficiency (128 replicas over one) within 5 points
of the published ones, except DP at 8.7B (examples/dp-scaling/README.md says why: an expected failure, strict)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_scripts import load_file

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.simulate import simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "dp-scaling"
PUBLISHED = {"1b-128gpu": 0.933, "2b-256gpu": 0.855, "4b-512gpu": 0.790, "8b-1024gpu": 0.727}
# published hardware TFLOP/s per GPU (Megatron-LM images/tables.tex @5281919420)
PUBLISHED_TFLOPS = {"1b-1gpu": 149.8, "1b-128gpu": 139.8, "2b-2gpu": 136.8, "2b-256gpu": 127.5, "4b-4gpu": 124.7,
                    "4b-512gpu": 116.7, "8b-8gpu": 109.3, "8b-1024gpu": 106.5}
MISSES_AT_8B = pytest.mark.xfail(strict=True, reason="8.7B: DP 9.8 points under (see its README)")


def hardware_tflops(name: str) -> float:
    return simulate(to_scenario(load_request_file(str(EXAMPLES / f"{name}.yaml")))).metrics.hardware_tflops_per_gpu


@pytest.fixture(scope="module")
def baseline() -> float:
    return hardware_tflops("1b-1gpu")


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED.items()))
def test_weak_scaling_efficiency_within_5_points(name: str, published: float, baseline: float) -> None:
    assert hardware_tflops(name) / baseline == pytest.approx(published, abs=0.05)


def test_data_parallel_runs_lose_to_their_single_replica(baseline: float) -> None:
    """The loss comes from the simulated all-reduce on the network, not from a constant."""
    for single, replicated in (("1b-1gpu", "1b-128gpu"), ("8b-8gpu", "8b-1024gpu")):
        one = simulate(to_scenario(load_request_file(str(EXAMPLES / f"{single}.yaml")))).metrics
        many = simulate(to_scenario(load_request_file(str(EXAMPLES / f"{replicated}.yaml")))).metrics
        assert many.iteration_time_s > one.iteration_time_s
        assert many.time_breakdown_s["dp_comm"] == pytest.approx(many.iteration_time_s - one.iteration_time_s,
                                                                  rel=0.05)
        assert many.communication_bytes["dp"] > 0


@pytest.mark.parametrize("replica", ["2b-2gpu", "4b-4gpu", "8b-8gpu"])
def test_tp_efficiency_within_5_points(replica: str, baseline: float) -> None:
    published = PUBLISHED_TFLOPS[replica] / PUBLISHED_TFLOPS["1b-1gpu"]
    assert hardware_tflops(replica) / baseline == pytest.approx(published, abs=0.05)


@pytest.mark.parametrize(("replicated", "replica"), [
    ("1b-128gpu", "1b-1gpu"), ("2b-256gpu", "2b-2gpu"), ("4b-512gpu", "4b-4gpu"),
    pytest.param("8b-1024gpu", "8b-8gpu", marks=MISSES_AT_8B)])
def test_dp_efficiency_within_5_points(replicated: str, replica: str) -> None:
    published = PUBLISHED_TFLOPS[replicated] / PUBLISHED_TFLOPS[replica]
    assert hardware_tflops(replicated) / hardware_tflops(replica) == pytest.approx(published, abs=0.05)


def _scaling_script() -> ModuleType:
    module = load_file(EXAMPLES / "scaling.py", "dp_scaling_script")
    return module


def test_the_example_readme_carries_the_current_tables() -> None:
    script = _scaling_script()
    text = script.README.read_text(encoding="utf-8")
    block = script.render(script.run_all(), script.overlapped_dp_efficiency())
    assert script.with_figures(text, block) == text, "run python examples/dp-scaling/scaling.py --write"


@pytest.mark.slow
def test_neither_ddp_reading_matches_every_size() -> None:
    """The README's reading: overlapped everywhere, 8.7B is within 5 points and 1.2B-4.2B are more than 5 over;
    after backward (as shipped), 8.7B is more than 5 under."""
    script = _scaling_script()
    overlapped = script.overlapped_dp_efficiency()
    found = {str(f["model"]): f for f in script.factors(script.run_all())}
    for model in ("1b", "2b", "4b"):
        assert overlapped[model] - float(found[model]["dp_eff_pub"]) > 0.05
    assert abs(overlapped["8b"] - float(found["8b"]["dp_eff_pub"])) < 0.05
    assert float(found["8b"]["dp_eff"]) - float(found["8b"]["dp_eff_pub"]) < -0.05
