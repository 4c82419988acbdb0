"""Setup that does not grow with the data-parallel size (docs/engine.md, "Setup independent of the data-parallel size"):
GPT-3 175B at TP 8 x PP 8 (bench/dp_scaling_speed.py's scenario) routes the same pairs, reads the same links'
capacities and counts the same patterns at DP 64 (4,096 GPUs) as at DP 256 (16,384 GPUs)."""

from __future__ import annotations

from simcore import NODE_PRESETS, Layout, Recompute, Scenario, model_from_fields, simulate, sized
from simcore.domain.presets import MODEL_PRESETS
from simcore.network import build_network


def work(dp: int) -> tuple[int, int, float]:
    layout = Layout(dp=dp, tp=8, pp=8, microbatch_size=1, global_batch_size=64 * dp, recompute=Recompute.SELECTIVE,
                    sequence_parallel=True, zero_stage=1, overlap_grad_reduce=True)
    scenario = Scenario(model_from_fields(MODEL_PRESETS["gpt3-175b"]), sized(NODE_PRESETS["dgx-a100"], 64 * dp), layout)
    network = build_network(scenario.cluster, scenario.algorithm)
    outcome = simulate(scenario, network)
    collectives = network.collectives
    return collectives.router.routed, len(collectives.capacity), outcome.metrics.iteration_time_s


def test_the_setup_of_dp_256_is_the_setup_of_dp_64() -> None:
    routed_64, links_64, _time_64 = work(64)
    routed_256, links_256, _time_256 = work(256)
    assert (routed_256, links_256) == (routed_64, links_64) == (853, 1698)  # (before: 65,536 pairs at DP 256)
