"""NVFP4 training (Transformer Engine's NVFP4BlockScaling): the projections' three GEMMs at the FP4 rate, the
quantization kernels' bytes, the FP4 weight copies in memory, a GEMM never slower in a faster dtype, and the GPUs
that refuse it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simcore.cost.compute.fp8 import FP8_WEIGHT_COPY_BYTES, QUANTIZE_BYTES, WEIGHT_QUANTIZE_BYTES, fp8_weight_elements
from simcore.cost.compute.gemm_ceilings import ceiling_fraction
from simcore.cost.compute.kernel_time import op_time
from simcore.cost.compute.kernels import PROJECTIONS, gemm_op, layer_forward_ops
from simcore.cost.compute.nvfp4 import (
    NVFP4_OPERAND_BYTES,
    NVFP4_QUANTIZE_BYTES,
    NVFP4_WEIGHT_COPY_BYTES,
    fp4_ceiling_fraction,
)
from simcore.cost.parameters import FITTED
from simcore.domain.layout import Fp8Recipe, Layout, Precision, validate_precision
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.errors import SpecError
from simcore.simulate import Scenario, simulate
from topology.cluster_spec import NODE_PRESETS, sized
from topology.hardware import GPUS, GpuKind

DOCS = Path(__file__).resolve().parents[4] / "docs"
LLAMA = model_from_fields(MODEL_PRESETS["llama3-8b"])
BLACKWELL = [GpuKind.B200_180GB, GpuKind.GB200_186GB, GpuKind.B300_288GB, GpuKind.GB300_288GB]


def scenario(precision: Precision, preset: str = "dgx-b200", recipe: Fp8Recipe | None = None) -> Scenario:
    layout = Layout(dp=2, tp=4, pp=1, microbatch_size=1, global_batch_size=8, sequence_parallel=True,
                    precision=precision, fp8_recipe=recipe)
    return Scenario(LLAMA, sized(NODE_PRESETS[preset], 8), layout)


def test_the_format_bytes_closed_forms() -> None:
    # E2M1 is half a byte, one E4M3 scale per 16 elements; an amax pass, then one read writing two copies
    assert NVFP4_OPERAND_BYTES == 0.5 + 1 / 16
    assert NVFP4_QUANTIZE_BYTES == 2 + 2 + 2 * (0.5 + 1 / 16) == 5.125
    assert QUANTIZE_BYTES[Fp8Recipe.NVFP4] == WEIGHT_QUANTIZE_BYTES[Fp8Recipe.NVFP4] == 5.125
    assert FP8_WEIGHT_COPY_BYTES[Fp8Recipe.NVFP4] == NVFP4_WEIGHT_COPY_BYTES == 1.125


def test_the_projections_run_in_fp4_after_their_quantize_kernels_and_attention_stays_16_bit() -> None:
    ops = layer_forward_ops(LLAMA, 1, 4, True, None, Fp8Recipe.NVFP4)
    fp4 = [op.name for op in ops if op.fp4]
    assert sorted(fp4) == sorted(name for name in PROJECTIONS if not name.startswith("cross"))
    assert not any(op.fp8 for op in ops)
    plain = {op.name: op for op in layer_forward_ops(LLAMA, 1, 4, True)}
    s, h, f, t = LLAMA.seq_length, LLAMA.hidden_size, LLAMA.ffn_hidden_size, 4
    by_name = {op.name: op for op in ops}
    down, q = by_name["mlp_down"], by_name["fp8_quantize_mlp_down"]
    # input (s x f/t) and weight (f/t x h) at 0.5625 bytes an element, the 16-bit output (s x h)
    assert down.bytes == pytest.approx(0.5625 * (s * f / t + f / t * h) + 2 * s * h)
    assert down.flops == plain["mlp_down"].flops
    assert q.bytes == pytest.approx(5.125 * s * f / t)
    assert q.backward().bytes == pytest.approx(5.125 * s * h)  # the output gradient, before dgrad and wgrad
    assert "fp8_scale_update" not in by_name  # no delayed scaling: the amax is the tensor's own
    assert by_name["flash_attention"] == plain["flash_attention"]


@pytest.mark.parametrize("gpu", BLACKWELL)
@pytest.mark.parametrize("shaped", [False, True])
def test_a_gemm_is_never_slower_in_a_faster_dtype(gpu: GpuKind, shaped: bool) -> None:
    spec, params = GPUS[gpu], replace(FITTED, gemm_shape_model=shaped)
    sizes = (1, 16, 128, 1024, 4096, 16384, 65536)
    checked = 0
    for m in sizes:
        for n in sizes:
            for k in sizes:
                bf16 = gemm_op("g", m, n, k)
                fp8 = replace(bf16, fp8=True, bytes=(m * k + k * n) + 2 * m * n)
                fp4 = replace(bf16, fp4=True, bytes=NVFP4_OPERAND_BYTES * (m * k + k * n) + 2 * m * n)
                for a, b, c in ((bf16, fp8, fp4), (bf16.backward(), fp8.backward(), fp4.backward())):
                    times = [op_time(op, spec, params) for op in (a, b, c)]
                    assert times[2] <= times[1] * (1 + 1e-12) and times[1] <= times[0] * (1 + 1e-12), (m, n, k)
                    checked += 1
    assert checked == 2 * len(sizes) ** 3


def test_a_large_fp4_gemm_runs_near_its_derived_ceiling() -> None:
    b200 = GPUS[GpuKind.B200_180GB]
    # B200's measured FP8 ceiling: 3,432.5 of 4,500 TFLOP/s; FP4's is derived as the same share of the FP4 peak
    assert fp4_ceiling_fraction(b200) == pytest.approx(3432.5 / 4500)
    gb200 = GPUS[GpuKind.GB200_186GB]  # no FP8 row: B200's share scaled by the two 16-bit ceilings
    assert fp4_ceiling_fraction(gb200) == pytest.approx(
        3432.5 / 4500 * ceiling_fraction(gb200, "bf16") / ceiling_fraction(b200, "bf16"))
    big = replace(gemm_op("g", 16384, 16384, 16384), fp4=True)
    rate = big.flops / op_time(big, b200, FITTED)
    print(f"16384^3 NVFP4 GEMM on B200: {rate / 1e12:.0f} TFLOP/s")
    contract = " ".join((DOCS / "contract-mlperf.md").read_text(encoding="utf-8").split())
    assert f"a 16384^3 NVFP4 GEMM on B200 runs at {rate / 1e12:,.0f} TFLOP/s in the model" in contract, \
        "docs/contract-mlperf.md (layout.precision: nvfp4, Rate) quotes a stale NVFP4 GEMM rate"
    assert 0.4 * b200.peak_fp4_flops_per_s < rate <= b200.peak_fp4_flops_per_s * fp4_ceiling_fraction(b200)
    fp8 = replace(gemm_op("g", 16384, 16384, 16384), fp8=True)
    assert 1.5 < rate / (fp8.flops / op_time(fp8, b200, FITTED)) < 2.0


def test_nvfp4_is_faster_than_fp8_and_its_weights_cost_their_fp4_copies() -> None:
    results = {p: simulate(scenario(p)).metrics for p in (Precision.BF16, Precision.FP8, Precision.NVFP4)}
    times = {p: m.iteration_time_s for p, m in results.items()}
    print("llama3-8b on 8 B200, TP 4:", {str(p): round(t, 4) for p, t in times.items()})
    assert times[Precision.NVFP4] < times[Precision.FP8] < times[Precision.BF16]
    bf16, fp4 = results[Precision.BF16].stages[0].memory, results[Precision.NVFP4].stages[0].memory
    copies = 1.125 * LLAMA.num_layers * fp8_weight_elements(LLAMA, LLAMA.main_layer(), 4)
    assert fp4.weights - bf16.weights == pytest.approx(copies)
    assert (fp4.gradients, fp4.optimizer_states) == (bf16.gradients, bf16.optimizer_states)


def test_precision_mxfp8_is_fp8_with_the_mxfp8_recipe() -> None:
    a = simulate(scenario(Precision.MXFP8)).metrics.iteration_time_s
    b = simulate(scenario(Precision.FP8, recipe=Fp8Recipe.MXFP8)).metrics.iteration_time_s
    assert a == b


@pytest.mark.parametrize("gpu", [GpuKind.H100_80GB, GpuKind.H200_141GB, GpuKind.A100_80GB, GpuKind.L40S_48GB])
def test_nvfp4_needs_fp4_tensor_cores(gpu: GpuKind) -> None:
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.NVFP4).layout, GPUS[gpu])
    assert err.value.field == "layout.precision" and "FP4 tensor cores" in err.value.rule
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.MXFP8).layout, GPUS[gpu])
    assert err.value.field == "layout.precision"


def test_nvfp4_is_a_precision_not_an_fp8_recipe() -> None:
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.FP8, recipe=Fp8Recipe.NVFP4).layout, GPUS[GpuKind.B200_180GB])
    assert err.value.field == "layout.fp8_recipe" and "precision nvfp4" in err.value.rule
    with pytest.raises(SpecError) as err:
        validate_precision(scenario(Precision.NVFP4, recipe=Fp8Recipe.MXFP8).layout, GPUS[GpuKind.B200_180GB])
    assert err.value.field == "layout.fp8_recipe"
