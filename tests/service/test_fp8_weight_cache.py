"""`layout.fp8_weight_cache: false` (Megatron-Core's disable_parameter_transpose_cache,
simcore/cost/compute/weight_cache.py): Transformer Engine makes the weights' FP8 copies again every microbatch. FP8
weights (LoRA's `fp8_params`) pay a 1-byte read and a 1-byte write of each GEMM weight in every backward (TE 1.x's
transpose for the data-gradient GEMM); 16-bit weights are quantized in every forward instead of once with the
optimizer step. A 16-bit layout refuses it, naming the field; requests without it are unchanged."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_cli_refuses, assert_http_refuses

from api_schemas import SimulationRequest
from service import convert
from simcore.cost.compute.fp8 import WEIGHT_QUANTIZE_BYTES
from simcore.cost.compute.weight_cache import TRANSPOSE_BYTES
from simcore.cost.parameters import FITTED, KERNEL_OVERHEAD_S
from simcore.domain.layout import Fp8Recipe
from simcore.simulate import simulate
from topology.hardware import GPUS, GpuKind

# Llama 2 70B LoRA on 16 H100s: TP 4 x CP 2 x DP 2, one microbatch of 8,192 tokens a replica and step
LORA: dict[str, Any] = {
    "model": {"preset": "llama2-70b", "seq_length": 8192, "attention": "flash",
              "lora": {"rank": 16, "targets": ["qkv", "proj"]}},
    "cluster": {"preset": "dgx-h100", "num_gpus": 16},
    "layout": {"dp": 2, "tp": 4, "pp": 1, "cp": 2, "global_batch_size": 2, "precision": "fp8",
               "sequence_parallel": True, "fp8_params": True},
}
LAYERS = 80
# a rank's GEMM weights in one layer at TP 4: QKV (64 + 2 x 8 heads of 128), the output projection, the gated MLP
LAYER_WEIGHTS = (8192 * (64 + 16) * 128 + 64 * 128 * 8192 + 3 * 8192 * 28672) / 4
PROJECTIONS = 4  # qkv, attention_output, mlp_up, mlp_down: one kernel each


def result(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def with_layout(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(LORA)
    doc["layout"].update(fields)
    doc["layout"] = {k: v for k, v in doc["layout"].items() if v is not None}
    return doc


def _memory_s(nbytes: float) -> float:
    spec = GPUS[GpuKind("h100-80gb")]
    return nbytes / (spec.hbm_bandwidth_bytes_per_s * FITTED.memory_efficiency)


def test_fp8_weights_are_transposed_in_every_backward() -> None:
    cached, uncached = result(LORA), result(with_layout(fp8_weight_cache=False))
    per_layer = _memory_s(TRANSPOSE_BYTES * LAYER_WEIGHTS) + PROJECTIONS * KERNEL_OVERHEAD_S
    assert uncached["iteration_time_s"] - cached["iteration_time_s"] == pytest.approx(LAYERS * per_layer, rel=1e-6)
    assert uncached["time_breakdown_s"]["optimizer"] == pytest.approx(cached["time_breakdown_s"]["optimizer"])
    assert "fp8_weight_cache" not in json.dumps(cached)


def test_16_bit_weights_are_quantized_every_microbatch_not_once_a_step() -> None:
    # two microbatches a step: each quantizes the weights in its forward; the optimizer step no longer does
    doc = with_layout(fp8_params=None, global_batch_size=4)
    cached, uncached = result(doc), result({**doc, "layout": {**doc["layout"], "fp8_weight_cache": False}})
    quantize_s = _memory_s(WEIGHT_QUANTIZE_BYTES[Fp8Recipe.TENSORWISE] * LAYERS * LAYER_WEIGHTS)
    drop = cached["time_breakdown_s"]["optimizer"] - uncached["time_breakdown_s"]["optimizer"]
    assert drop == pytest.approx(quantize_s, rel=1e-6)
    per_microbatch = quantize_s + LAYERS * PROJECTIONS * KERNEL_OVERHEAD_S
    assert uncached["iteration_time_s"] - cached["iteration_time_s"] == pytest.approx(2 * per_microbatch - quantize_s,
                                                                                      rel=1e-6)


def test_a_16_bit_layout_refuses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = with_layout(precision="bf16", fp8_params=None, fp8_weight_cache=False)
    rule = "needs precision fp8, mxfp8 or nvfp4"
    assert_cli_refuses(capsys, tmp_path, doc, "layout.fp8_weight_cache", rule)
    assert_http_refuses(tmp_path, doc, "layout.fp8_weight_cache", rule)
