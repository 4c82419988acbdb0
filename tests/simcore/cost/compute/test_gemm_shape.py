"""The GEMM shape model (simcore/cost/compute/gemm_shape.py): closed forms of tile and wave quantization and the
per-tile cost, each gradient product by its own shape, the fp32 main_grad traffic of a weight gradient, and exactly the
FLOPs-only model when it is off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.cost.compute.fp8 import fp8_gemm_efficiency
from simcore.cost.compute.gemm_shape import MAIN_GRAD_BYTES, TILE_M, TILE_N, Product, gradient_products, tiled_compute_s
from simcore.cost.compute.kernel_time import op_time, shaped_gemm_times, weight_gradient_time
from simcore.cost.compute.kernels import BYTES, Op, OpKind, fp8_ops, gemm_op, layer_forward_ops
from simcore.cost.compute.weight_gradients import weight_share
from simcore.cost.parameters import FITTED, KERNEL_OVERHEAD_S
from simcore.domain.layout import Fp8Recipe
from simcore.domain.model import model_from_fields
from topology.hardware import GPUS, GpuKind

A100 = GPUS[GpuKind.A100_80GB]
SHAPED = replace(FITTED, gemm_shape_model=True, gemm_prologue_k=64.0)


def test_gradient_products_swap_the_dimensions() -> None:
    dx, dw = gradient_products(Product(6144, 6912, 2304))
    assert (dx.m, dx.n, dx.k) == (6144, 2304, 6912)  # dX = dY W^T: tokens x in, over out
    assert (dw.m, dw.n, dw.k) == (2304, 6912, 6144)  # dW = X^T dY: in x out, over the tokens
    assert dx.flops == dw.flops == Product(6144, 6912, 2304).flops


def test_waves_closed_form() -> None:
    rate, sms = 1e12, 100
    one_wave = Product(TILE_M * 10, TILE_N * 10, 1000)  # 100 tiles on 100 SMs
    wave_s = 2.0 * TILE_M * TILE_N * 1000 / rate
    assert tiled_compute_s(one_wave, sms, rate, 0.0) == pytest.approx(wave_s)
    # One row more: an edge row of 10 tiles, 110 tiles, two waves.
    assert tiled_compute_s(replace(one_wave, m=TILE_M * 10 + 1), sms, rate, 0.0) == pytest.approx(2 * wave_s)
    # A batch of 3 single tiles: one wave, as long as a whole tile's, however small the tiles.
    assert tiled_compute_s(Product(5, 7, 1000, batch=3), sms, rate, 0.0) == pytest.approx(wave_s)
    # The per-tile cost: k + prologue_k per wave.
    assert tiled_compute_s(one_wave, sms, rate, 250.0) == pytest.approx(wave_s * 1.25)
    assert tiled_compute_s(Product(0, 7, 9), sms, rate, 250.0) == 0.0


def test_off_it_is_the_flops_only_model_exactly() -> None:
    for m, n, k, batch in ((6144, 6912, 2304, 1), (1024, 1024, 96, 144), (1, 50257, 4096, 1)):
        shaped = gemm_op("g", m, n, k, batch)
        bare = Op("g", OpKind.GEMM, shaped.flops, shaped.bytes)
        assert op_time(shaped, A100, FITTED) == op_time(bare, A100, FITTED)
        assert op_time(shaped.backward(), A100, FITTED) == op_time(bare.backward(), A100, FITTED)
        assert weight_gradient_time(shaped.backward(), A100, FITTED) == op_time(bare.backward(), A100, FITTED) / 2


def test_on_each_product_is_costed_by_its_shape() -> None:
    op = gemm_op("qkv", 1024, 15360, 5120)
    assert op.shape is not None
    rate = A100.peak_flops_per_s * FITTED.gemm_efficiency_ampere / A100.sm_count
    half = FITTED.gemm_half_time_ampere_s
    expected = [tiled_compute_s(p, A100.sm_count, rate, 64.0) + half for p in gradient_products(op.shape)]
    assert shaped_gemm_times(op.backward(), A100, SHAPED) == pytest.approx(tuple(expected))
    assert op_time(op.backward(), A100, SHAPED) == pytest.approx(sum(expected) + KERNEL_OVERHEAD_S)
    assert weight_gradient_time(op.backward(), A100, SHAPED) == pytest.approx(expected[1] + KERNEL_OVERHEAD_S / 2)
    # dW's k is the 1,024 tokens, dX's the 15,360 outputs: the per-tile cost weighs more on dW.
    assert expected[1] > expected[0]


def test_a_memory_bound_weight_gradient_moves_the_fp32_main_grad() -> None:
    op = gemm_op("mlp_up", 1, 16384, 4096)  # one token: dW is an outer product, all traffic
    bandwidth = A100.hbm_bandwidth_bytes_per_s * FITTED.memory_efficiency
    dw = shaped_gemm_times(op.backward(), A100, SHAPED)[1]
    assert dw == pytest.approx((op.bytes + (MAIN_GRAD_BYTES - BYTES) * 4096 * 16384) / bandwidth)
    attention = gemm_op("attention_scores", 1, 16384, 4096)
    attention = replace(attention, weight=False)
    assert shaped_gemm_times(attention.backward(), A100, SHAPED)[1] == pytest.approx(op.bytes / bandwidth)


def test_layer_weight_share_follows_the_shapes() -> None:
    model = model_from_fields({"architecture": "decoder_only", "num_layers": 2, "hidden_size": 5120,
                               "num_attention_heads": 40, "ffn_hidden_size": 20480, "vocab_size": 50257,
                               "seq_length": 1024, "attention": "standard"})
    backward = tuple(op.backward() for op in layer_forward_ops(model, 1, 1, False))
    off = weight_share(backward, A100, FITTED)
    on = weight_share(backward, A100, SHAPED)
    gemm_half = sum(op_time(op, A100, FITTED) for op in backward if op.weight) / 2
    assert off == pytest.approx(gemm_half / sum(op_time(op, A100, FITTED) for op in backward))
    total = sum(op_time(op, A100, SHAPED) for op in backward)
    assert on == pytest.approx(sum(weight_gradient_time(op, A100, SHAPED) for op in backward if op.weight) / total)
    assert on != off


def test_an_fp8_projection_on_blackwell_runs_at_the_fp8_rate_by_its_shape() -> None:
    b200 = GPUS[GpuKind.B200_180GB]
    (gemm,) = [op for op in fp8_ops((gemm_op("mlp_up", 8192, 14336, 4096),), Fp8Recipe.MXFP8) if op.fp8]
    assert gemm.shape is not None
    # Blackwell takes Hopper's fitted half time, and its efficiency read against the two GPUs' measured GEMM
    # ceilings (simcore/cost/compute/gemm_ceilings.py: 1,745 of 2,250 TFLOP/s on B200, 794.5 of 989.4 on H100)
    efficiency = SHAPED.gemm_efficiency_hopper * (1745 / 2250) / (794.5 / 989.4)
    rate = b200.peak_fp8_flops_per_s * fp8_gemm_efficiency(efficiency) / b200.sm_count
    half = SHAPED.gemm_half_time_hopper_s
    expected = tiled_compute_s(gemm.shape, b200.sm_count, rate, 64.0) + half
    assert op_time(gemm, b200, SHAPED) == pytest.approx(expected + KERNEL_OVERHEAD_S)
    assert 0 < op_time(gemm.backward(), b200, SHAPED) < 2.5 * op_time(gemm, b200, SHAPED)
