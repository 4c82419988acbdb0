"""FP8 training: GEMMs at the FP8 rate from kernels, the recipes' quantize kernels, memory, and the published
BF16/FP8 speed-ups."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.calibration import modern
from simcore.calibration.validate import load_reference, measured_time
from simcore.cost.compute.fp8 import (
    FP8_GEMM_EFFICIENCY_RATIO,
    FP8_WEIGHT_COPY_BYTES,
    QUANTIZE_BYTES,
    fp8_weight_elements,
)
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.kernels import PROJECTIONS, OpKind, layer_forward_ops
from simcore.cost.parameters import FITTED, KERNEL_OVERHEAD_S
from simcore.domain.layout import Fp8Recipe, Layout, Precision, validate_precision
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.errors import SpecError
from simcore.simulate import Scenario, simulate
from topology.cluster_spec import NODE_PRESETS, sized
from topology.hardware import GPUS, GpuKind

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

H100 = GPUS[GpuKind.H100_80GB]
LLAMA = model_from_fields(MODEL_PRESETS["llama3-8b"])

# The FP8 recipes a user sets in layout.fp8_recipe (NVFP4 is precision nvfp4's own:
# tests/simcore/cost/compute/test_nvfp4.py).
FP8_RECIPES = [recipe for recipe in Fp8Recipe if recipe not in (Fp8Recipe.NVFP4, Fp8Recipe.TENSORWISE_CURRENT)]


def scenario(precision: Precision, recipe: Fp8Recipe | None = None, preset: str = "dgx-h100") -> Scenario:
    layout = Layout(dp=2, tp=4, pp=1, microbatch_size=1, global_batch_size=8, sequence_parallel=True,
                    precision=precision, fp8_recipe=recipe)
    return Scenario(LLAMA, sized(NODE_PRESETS[preset], 8), layout)


def test_only_the_projections_run_in_fp8_each_after_its_quantize_kernel() -> None:
    ops = layer_forward_ops(LLAMA, 1, 4, True, None, Fp8Recipe.TENSORWISE)
    fp8 = [op.name for op in ops if op.fp8]
    assert sorted(fp8) == sorted(n for n in PROJECTIONS if not n.startswith("cross"))
    for i, op in enumerate(ops):
        if op.fp8:
            assert ops[i - 1].name == "fp8_quantize_" + op.name and ops[i - 1].kind is OpKind.MEMORY
    # attention, norms, dropouts and the activation stay 16-bit and unchanged, but that the norms before QKV and the
    # MLP write their (FP8) output in one byte under delayed scaling (test_fp8_scaling.py): same backward traffic
    plain = layer_forward_ops(LLAMA, 1, 4, True)
    kept = [op for op in ops if not op.fp8 and not op.name.startswith("fp8_")]
    assert [op.name for op in kept] == [op.name for op in plain if op.name not in PROJECTIONS]
    for op, before in zip(kept, [op for op in plain if op.name not in PROJECTIONS], strict=True):
        assert op == before or (op.name == "layernorm" and op.bytes < before.bytes and op.backward().bytes
                                == pytest.approx(before.backward().bytes))


def test_quantize_kernel_moves_the_recipe_bytes_forward_and_the_output_gradient_backward() -> None:
    plain = {op.name: op for op in layer_forward_ops(LLAMA, 1, 1, False)}
    for recipe in FP8_RECIPES:
        ops = {op.name: op for op in layer_forward_ops(LLAMA, 1, 1, False, None, recipe)}
        q = ops["fp8_quantize_mlp_down"]
        s, f, h = LLAMA.seq_length, LLAMA.ffn_hidden_size, LLAMA.hidden_size
        assert q.bytes == pytest.approx(QUANTIZE_BYTES[recipe] * s * f)
        assert q.backward().bytes == pytest.approx(QUANTIZE_BYTES[recipe] * s * h)
        # one-byte operands, 16-bit output
        gemm = ops["mlp_down"]
        assert gemm.bytes == pytest.approx(s * f + f * h + 2 * s * h)
        assert gemm.flops == plain["mlp_down"].flops
    assert "fp8_scale_update" in {op.name for op in layer_forward_ops(LLAMA, 1, 1, False, None, Fp8Recipe.TENSORWISE)}
    assert "fp8_scale_update" not in {op.name for op in layer_forward_ops(LLAMA, 1, 1, False, None, Fp8Recipe.MXFP8)}


def test_a_large_fp8_gemm_runs_at_its_fp8_rate_and_efficiency() -> None:
    ops = {op.name: op for op in layer_forward_ops(LLAMA, 8, 1, False, None, Fp8Recipe.TENSORWISE)}
    gemm = ops["mlp_up"]
    eta = FITTED.gemm_efficiency_hopper * FP8_GEMM_EFFICIENCY_RATIO
    half = H100.peak_fp8_flops_per_s * eta * FITTED.gemm_half_time_hopper_s
    expected = gemm.flops / (H100.peak_fp8_flops_per_s * eta * gemm.flops / (gemm.flops + half))
    assert op_time(gemm, H100, FITTED) == pytest.approx(max(expected, gemm.bytes / (
        H100.hbm_bandwidth_bytes_per_s * FITTED.memory_efficiency)) + KERNEL_OVERHEAD_S)
    bf16 = replace(gemm, fp8=False)
    # faster than the 16-bit GEMM, but by less than the 2x of the peaks (lower efficiency, larger half size)
    assert 1.0 < op_time(bf16, H100, FITTED) / op_time(gemm, H100, FITTED) < 2.0


def test_fp8_speeds_up_the_step_and_leaves_communication_alone() -> None:
    bf16 = simulate(scenario(Precision.BF16)).metrics
    fp8 = simulate(scenario(Precision.FP8)).metrics
    assert 1.0 < bf16.iteration_time_s / fp8.iteration_time_s < 2.0
    assert fp8.communication_bytes == bf16.communication_bytes
    assert fp8.model_flops_per_iteration == bf16.model_flops_per_iteration


def test_recipes_differ_only_by_their_kernels() -> None:
    times = {r: simulate(scenario(Precision.FP8, r, "dgx-b200")).metrics.iteration_time_s for r in FP8_RECIPES}
    # rowwise moves the most bytes per quantized element; delayed tensorwise the fewest, its norm-fed inputs coming
    # FP8 out of their norm (mxfp8's norm writes 16 bits unless cuDNN's norm runs: TE normalization.cpp)
    assert times[Fp8Recipe.ROWWISE] > times[Fp8Recipe.MXFP8] > times[Fp8Recipe.TENSORWISE]


def test_memory_adds_the_fp8_weight_copies() -> None:
    bf16 = simulate(scenario(Precision.BF16)).metrics.stages[0].memory
    fp8 = simulate(scenario(Precision.FP8)).metrics.stages[0].memory
    copies = FP8_WEIGHT_COPY_BYTES[Fp8Recipe.TENSORWISE] * LLAMA.num_layers * fp8_weight_elements(
        LLAMA, LLAMA.main_layer(), 4)
    assert fp8.weights - bf16.weights == pytest.approx(copies)
    assert (fp8.gradients, fp8.optimizer_states) == (bf16.gradients, bf16.optimizer_states)


@pytest.mark.parametrize("gpu", [GpuKind.V100_32GB, GpuKind.A100_40GB, GpuKind.A100_80GB])
def test_fp8_needs_fp8_tensor_cores(gpu: GpuKind) -> None:
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.FP8).layout, GPUS[gpu])
    assert err.value.field == "layout.precision" and "FP8 tensor cores" in err.value.rule


def test_mxfp8_needs_blackwell_and_a_recipe_needs_fp8() -> None:
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.FP8, Fp8Recipe.MXFP8).layout, H100)
    assert err.value.field == "layout.fp8_recipe"
    validate_precision(scenario(Precision.FP8, Fp8Recipe.MXFP8).layout, GPUS[GpuKind.B200_180GB])
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.BF16, Fp8Recipe.ROWWISE).layout, H100)
    assert err.value.field == "layout.fp8_recipe"


def visible_pairs() -> list[tuple[str, str]]:
    """Every BF16/FP8 pair of expressible rows on the same layout (same id but for the precision)."""
    ids = {c["id"] for c in load_reference(None, modern.REFERENCE) if modern.handles(c)}
    pairs = [(i, i.replace("-bf16-", "-fp8-")) for i in ids if "-bf16-" in i and i.replace("-bf16-", "-fp8-") in ids]
    pairs.append(("tt2412-llama31-8b-fsdp-compile-8gpu", "tt2412-llama31-8b-fsdp-compile-float8-8gpu"))
    return sorted(pairs)  # the Llama-3.1-8B pairs of dgxc v24.11.1 run with context parallelism 2


@pytest.mark.parametrize(("bf16_id", "fp8_id"), visible_pairs())
def test_published_fp8_speed_ups_within_0_08(bf16_id: str, fp8_id: str) -> None:
    rows = {c["id"]: c for c in load_reference(None, modern.REFERENCE)}
    published = measured_time(rows[bf16_id]) / measured_time(rows[fp8_id])  # type: ignore[operator]
    simulated = (simulate(modern.scenario_for(rows[bf16_id])).metrics.iteration_time_s
                 / simulate(modern.scenario_for(rows[fp8_id])).metrics.iteration_time_s)
    assert abs(simulated - published) <= 0.08


def in_scope(case: dict) -> bool:
    """The FP8 and Blackwell rows: training runs tagged fp8, hardware-b200 or hardware-gb200, without CP or experts."""
    tags = set(case.get("feature", []))
    lay, model = case["layout"], case["model"]
    return (case.get("kind") == "training" and bool(tags & {"fp8", "hardware-b200", "hardware-gb200"})
            and int(lay.get("cp") or 1) == 1 and not model.get("experts") and "moe" not in tags)


def test_every_fp8_and_blackwell_row_is_simulated_and_judged_within_bounds() -> None:
    from simcore.calibration.validate import run_validation

    report = run_validation()
    rows = [c for c in load_reference(None, modern.REFERENCE) if in_scope(c)]
    assert len(rows) == 35
    cases = {c["id"]: c for c in report["cases"] if c.get("reference") == modern.REFERENCE}
    assert {c["id"] for c in rows} <= cases.keys()
    judged = [abs(cases[c["id"]]["error_pct"]) for c in rows if not cases[c["id"]]["calibration"]]
    assert len(judged) == 19
    assert sum(judged) / len(judged) <= 10.0 and max(judged) <= 25.0
    by_file = report["by_reference"][modern.REFERENCE]
    every = [abs(c["error_pct"]) for c in cases.values() if not c["calibration"]]  # CP and MoE rows too
    assert by_file["not_fitted"]["mean_abs_error_pct"] == pytest.approx(sum(every) / len(every))
