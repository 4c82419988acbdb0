"""`layout.zero_implementation: fsdp`: FSDP's unit per transformer layer, with its prefetch limits."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.sharding import POLICIES
from simcore.domain.layout import Layout, Recompute, ZeroImplementation, validate_layout
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import Outcome, Scenario, simulate
from topology import NODE_PRESETS, sized
from topology.errors import SpecError

MODEL = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
LAYOUT = Layout(dp=8, tp=1, pp=1, microbatch_size=4, global_batch_size=32, zero_stage=3,
                recompute=Recompute.FULL, overlap_grad_reduce=True)


def outcome(implementation: ZeroImplementation, **changes: object) -> Outcome:
    layout = dataclasses.replace(LAYOUT, zero_implementation=implementation, **changes)
    return simulate(Scenario(MODEL, sized(NODE_PRESETS["dgx-a100"], layout.num_gpus), layout, keep_spans=True))


def forward_gathers(out: Outcome) -> list[float]:
    """Start times of the gather stream's all-gathers before the first backward computation."""
    first_backward = min(s.start_s for s in out.spans if s.category == "compute" and s.name.startswith("bwd"))
    return sorted(s.start_s for s in out.spans if s.track == "stage 0 gather" and s.start_s < first_backward)


def layer_compute_starts(out: Outcome) -> list[float]:
    return sorted(s.start_s for s in out.spans if s.category == "compute" and s.name.startswith("fwd mb0 part"))


def test_fsdp_defaults_come_from_the_source() -> None:
    fsdp = POLICIES[ZeroImplementation.FSDP]
    # limit_all_gathers: _max_num_inflight_all_gathers = 2; BackwardPrefetch.BACKWARD_PRE, backward_prefetch_limit 1
    assert (fsdp.forward_depth, fsdp.backward_depth) == (2, 1)
    assert not fsdp.per_submodule and not fsdp.per_parameter and not fsdp.regather_on_recompute


def test_fsdp_lets_the_gathers_run_two_units_ahead_in_forward() -> None:
    # Compute-bound (8 GPUs on NVLink, 4-sample microbatches): Megatron issues layer k+1's gather when layer k
    # starts; FSDP's rate limiter lets layer k+2's gather go when layer k starts, so the third gather starts
    # before the second layer computes.
    megatron, fsdp = outcome(ZeroImplementation.MEGATRON), outcome(ZeroImplementation.FSDP)
    m_gathers, m_layers = forward_gathers(megatron), layer_compute_starts(megatron)
    f_gathers, f_layers = forward_gathers(fsdp), layer_compute_starts(fsdp)
    assert m_gathers[2] == pytest.approx(m_layers[1])
    assert f_gathers[2] < f_layers[1]
    # the gathers themselves are the same: one per layer per pass, the same bytes
    assert fsdp.metrics.communication_bytes["zero"] == pytest.approx(megatron.metrics.communication_bytes["zero"])


def test_fsdp_is_no_slower_than_one_gather_ahead() -> None:
    assert (outcome(ZeroImplementation.FSDP).metrics.iteration_time_s
            <= outcome(ZeroImplementation.MEGATRON).metrics.iteration_time_s + 1e-12)


@pytest.mark.parametrize("implementation", ["fsdp", "deepspeed", "deepspeed_2021"])
def test_the_framework_implementations_need_zero_stage_3(implementation: str) -> None:
    layout = dataclasses.replace(LAYOUT, zero_stage=1, zero_implementation=ZeroImplementation(implementation))
    with pytest.raises(SpecError) as err:
        validate_layout(layout, MODEL, layout.num_gpus)
    assert err.value.field == "layout.zero_implementation"


def test_gather_buckets_are_megatron_s_only() -> None:
    layout = dataclasses.replace(LAYOUT, zero_implementation=ZeroImplementation.FSDP,
                                 zero3_gather_bucket_elements=1_000_000)
    with pytest.raises(SpecError) as err:
        validate_layout(layout, MODEL, layout.num_gpus)
    assert err.value.field == "layout.zero3_gather_bucket_elements"


def test_with_context_parallelism_each_units_gradient_is_reduce_scattered() -> None:
    """A context-parallel pass runs behind its gathers on the ring's path; FSDP still reduce-scatters each unit's
    gradient as its backward ends: the same bytes per microbatch over the same dp x cp group as without cp."""
    model = model_from_fields({**MODEL_PRESETS["llama2-7b"], "seq_length": 4096, "num_layers": 8,
                               "attention": "flash"})
    plain = Layout(dp=16, tp=1, pp=1, microbatch_size=1, global_batch_size=16, zero_stage=3,
                   zero_implementation=ZeroImplementation.FSDP, overlap_grad_reduce=True)
    ring = dataclasses.replace(plain, dp=8, cp=2)  # 16 over dp x cp again, two microbatches a rank

    def sent(layout: Layout) -> dict[str, float]:
        return simulate(Scenario(model, sized(NODE_PRESETS["dgx-h100"], 16), layout)).metrics.communication_bytes

    without, with_cp = sent(plain), sent(ring)
    assert with_cp["dp"] > 0 and with_cp["dp"] == pytest.approx(2 * without["dp"])
    assert with_cp["zero"] == pytest.approx(2 * without["zero"])
