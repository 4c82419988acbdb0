"""Tensorwise FP8's two scalings (`layout.fp8_scaling`, simcore/cost/compute/fp8.py): the kernels each adds to a
layer, byte for byte against Transformer Engine's code paths, and the recipe a layout's projections run. The
requests, the rules and the interop names: tests/service/test_fp8_scaling_requests.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simcore.cost.compute.fp8 import AMAX_BYTES, QUANTIZE_BYTES, TRANSPOSE_BYTES
from simcore.cost.compute.kernels import BYTES, PROJECTIONS, Op, layer_forward_ops
from simcore.domain.layout import Fp8Recipe, Fp8Scaling, Layout, Precision
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS

MODEL = model_from_fields({**MODEL_PRESETS["llama3-8b"], "seq_length": 4096})
B, T = 1, 1


def _ops(recipe: Fp8Recipe | None) -> dict[str, Op]:
    return {op.name: op for op in layer_forward_ops(MODEL, B, T, False, fp8=recipe)}


def _traffic(op: Op) -> tuple[float, float]:
    """(forward, backward) bytes of a memory-bound kernel."""
    return op.bytes, op.bytes * op.backward_bytes


def test_delayed_scaling_takes_the_fp8_input_of_qkv_and_mlp_up_out_of_their_norm() -> None:
    """Impl::FULLY_FUSED (TE normalization.cpp): the norm writes the 1-byte element, the GEMM's input quantization
    is only its transpose; every other projection input is cast and transposed with the amax in the cast (4 bytes);
    the output gradients are cast as before."""
    plain, delayed = _ops(None), _ops(Fp8Recipe.TENSORWISE)
    norm_elements = plain["layernorm"].bytes / (2 * BYTES)
    norm_fwd, norm_bwd = _traffic(delayed["layernorm"])
    assert norm_fwd == pytest.approx(plain["layernorm"].bytes - norm_elements)  # writes 1 byte instead of 2
    assert norm_bwd == pytest.approx(_traffic(plain["layernorm"])[1])  # its backward is unchanged
    for name in ("qkv", "mlp_up"):
        fwd, bwd = _traffic(delayed["fp8_quantize_" + name])
        assert fwd == pytest.approx(TRANSPOSE_BYTES * plain[name].elements_in)
        assert bwd == pytest.approx(QUANTIZE_BYTES[Fp8Recipe.TENSORWISE] * plain[name].elements_out)
    for name in ("attention_output", "mlp_down"):
        assert delayed["fp8_quantize_" + name].bytes == pytest.approx(4 * plain[name].elements_in)
    assert not any(name.startswith("fp8_amax_") for name in delayed)
    assert "fp8_scale_update" in delayed


def test_current_scaling_reads_every_tensor_but_a_norm_fed_input_once_more_for_its_amax() -> None:
    """Float8CurrentScalingQuantizer::quantize_impl (TE quantizer.cpp): nvte_compute_amax, the scale, the cast; a
    norm-fed input takes its amax from the norm (Impl::FUSED_NORM_AMAX_FP8). No amax history to update."""
    plain, current = _ops(None), _ops(Fp8Recipe.TENSORWISE_CURRENT)
    assert current["layernorm"].bytes == plain["layernorm"].bytes  # the norm writes its 16-bit output
    scales = 4.0  # one fp32 scale a tensor
    for name in ("qkv", "attention_output", "mlp_up", "mlp_down"):
        op = plain[name]
        fed_by_norm = name in ("qkv", "mlp_up")
        fwd, bwd = _traffic(current["fp8_amax_" + name])
        assert fwd == pytest.approx((0 if fed_by_norm else AMAX_BYTES * op.elements_in) + scales)
        assert bwd == pytest.approx(AMAX_BYTES * op.elements_out + scales)
        assert current["fp8_quantize_" + name].bytes == pytest.approx(4 * op.elements_in)
        assert current["fp8_amax_" + name].fused_host  # issued inside the same quantize call
    assert "fp8_scale_update" not in current
    assert {n for n in plain if n in PROJECTIONS} == {n[len("fp8_amax_"):] for n in current if n.startswith(
        "fp8_amax_")}


def test_the_recipe_the_projections_run() -> None:
    layout = Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=1, precision=Precision.FP8)
    assert layout.fp8 is Fp8Recipe.TENSORWISE
    assert replace(layout, fp8_scaling=Fp8Scaling.CURRENT).fp8 is Fp8Recipe.TENSORWISE_CURRENT
    assert replace(layout, fp8_scaling=Fp8Scaling.DELAYED).fp8 is Fp8Recipe.TENSORWISE


def test_the_contract_quotes_the_bytes_each_scaling_moves() -> None:
    """docs/contract-fp8-scaling.md: current scaling's amax reads a token of a Llama 3 8B layer (TP 1), and what
    delayed scaling's fused norm saves an element of a norm-fed input."""
    text = (Path(__file__).resolve().parents[4] / "docs" / "contract-fp8-scaling.md").read_text(encoding="utf-8")
    plain, current, delayed = _ops(None), _ops(Fp8Recipe.TENSORWISE_CURRENT), _ops(Fp8Recipe.TENSORWISE)
    tokens = B * MODEL.seq_length
    amax = sum(sum(_traffic(op)) - 2 * 4.0 for name, op in current.items() if name.startswith("fp8_amax_"))
    assert f"amax kernels read {amax / tokens / 1000:.0f} KB a token" in text
    qkv = plain["qkv"].elements_in
    saved = (plain["layernorm"].bytes - delayed["layernorm"].bytes) / qkv + (
        4 * qkv - delayed["fp8_quantize_qkv"].bytes) / qkv
    assert f"saves delayed scaling {saved:.0f} bytes an element" in text


def test_a_lora_adapted_projection_and_the_cross_attention_query_get_an_unfused_norm() -> None:
    """NeMo's LoRA returns the norm's output to its adapter (return_layernorm_output: Transformer Engine's quantized
    norm off), and Megatron-Core's encoder-decoder spec runs the cross-attention's norm as a TENorm of its own: their
    GEMMs quantize a 16-bit input, with a full cast (delayed) and an amax pass (current)."""
    from simcore.cost.compute.kernels import fp8_ops

    plain = layer_forward_ops(MODEL, B, T, False)
    delayed = {op.name: op for op in fp8_ops(plain, Fp8Recipe.TENSORWISE, frozenset({"qkv"}))}
    elements = {op.name: op.elements_in for op in plain if op.name in PROJECTIONS}
    assert delayed["fp8_quantize_qkv"].bytes == pytest.approx(4 * elements["qkv"])  # not fused
    assert delayed["fp8_quantize_mlp_up"].bytes == pytest.approx(TRANSPOSE_BYTES * elements["mlp_up"])  # fused
    current = {op.name: op for op in fp8_ops(plain, Fp8Recipe.TENSORWISE_CURRENT, frozenset({"qkv"}))}
    assert current["fp8_amax_qkv"].bytes == pytest.approx(AMAX_BYTES * elements["qkv"] + 4)
    t5 = model_from_fields(MODEL_PRESETS["t5-3b"])
    decoder = next(layer for layer, _ in t5.layer_stacks() if layer.cross_seq)
    ops = {op.name: op for op in layer_forward_ops(t5, B, T, False, decoder, Fp8Recipe.TENSORWISE)}
    cross_q = next(op for op in layer_forward_ops(t5, B, T, False, decoder) if op.name == "cross_q")
    assert ops["fp8_quantize_cross_q"].bytes == pytest.approx(4 * cross_q.elements_in)
