"""PyTorch eager elementwise kernels (simcore/cost/compute/eager.py): closed forms of the bytes and launches they add
over the fused kernels, and what that does to a layer and to a request."""

from __future__ import annotations

import math
from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore.calibration import modern
from simcore.cost.compute.eager import RMSNORM_KERNELS, ROPE_KERNELS, SWIGLU_KERNELS, eager_bytes, eager_elementwise
from simcore.cost.compute.kernel_time import ops_flops, ops_time
from simcore.cost.compute.kernels import OpKind, layer_forward_ops
from simcore.cost.compute.moe_kernels import transformer_layer_ops
from simcore.cost.parameters import FITTED, KERNEL_OVERHEAD_S
from simcore.domain.layout import ElementwiseKernels
from simcore.domain.model import model_from_fields
from simcore.simulate import simulate
from topology.hardware import GPUS, GpuKind

H100 = GPUS[GpuKind.H100_80GB]
LLAMA = model_from_fields({"architecture": "decoder_only", "num_layers": 4, "hidden_size": 4096,
                           "num_attention_heads": 32, "num_kv_heads": 8, "ffn_hidden_size": 14336,
                           "vocab_size": 128256, "seq_length": 8192, "attention": "flash", "activation": "swiglu",
                           "tied_embeddings": False})
GPT = model_from_fields({"architecture": "decoder_only", "num_layers": 4, "hidden_size": 4096,
                         "num_attention_heads": 32, "ffn_hidden_size": 16384, "vocab_size": 51200,
                         "seq_length": 2048, "attention": "flash", "activation": "gelu", "tied_embeddings": True})


def test_the_chains_move_what_their_ops_read_and_write() -> None:
    # RMSNorm: 36 bytes an element forward where the fused norm moves 4, 66 backward where it moves 6
    assert eager_bytes(RMSNORM_KERNELS) == (36.0, 66.0)
    assert eager_bytes(ROPE_KERNELS) == (20.0, 20.0)
    assert eager_bytes(SWIGLU_KERNELS) == (10.0, 18.0)


def _extra(model: Any, b: int) -> tuple[float, float, int]:
    """Forward bytes, backward bytes and kernels the eager layer adds over the fused one, by hand."""
    layer = model.main_layer()
    tokens = b * layer.seq
    h, f, d = model.hidden_size, model.ffn_hidden_size, model.head_dim
    qk = tokens * (model.num_attention_heads + model.num_kv_heads) * d
    forward = 2 * tokens * h * (36 - 4) + qk * 20
    backward = 2 * tokens * h * (66 - 6) + qk * 20
    kernels = 2 * (len(RMSNORM_KERNELS) - 1) + 2 * len(ROPE_KERNELS)
    if model.gated_mlp:
        forward += tokens * f * (10 - 6)
        backward += tokens * f * (18 - 10)
        kernels += len(SWIGLU_KERNELS) - 1
    return forward, backward, kernels


@pytest.mark.parametrize("model", [LLAMA, GPT], ids=["llama-swiglu", "gpt-gelu"])
def test_eager_layer_costs_its_extra_bytes_at_hbm_speed_and_its_extra_launches(model: Any) -> None:
    b = 2
    fused = layer_forward_ops(model, b, 1, False)
    eager = eager_elementwise(fused, model, b, 1, model.main_layer())
    assert ops_flops(eager) == ops_flops(fused)  # the GEMMs and attention are the same
    assert all(op.kind is OpKind.MEMORY for op in eager if op.name.endswith(tuple(f"eager{i}" for i in range(8))))
    forward, backward, kernels = _extra(model, b)
    bandwidth = H100.hbm_bandwidth_bytes_per_s * FITTED.memory_efficiency
    expected = forward / bandwidth + kernels * KERNEL_OVERHEAD_S
    assert math.isclose(ops_time(eager, H100, FITTED) - ops_time(fused, H100, FITTED), expected, rel_tol=1e-9)
    expected_bwd = backward / bandwidth + kernels * KERNEL_OVERHEAD_S
    got_bwd = (ops_time(tuple(op.backward() for op in eager), H100, FITTED)
               - ops_time(tuple(op.backward() for op in fused), H100, FITTED))
    assert math.isclose(got_bwd, expected_bwd, rel_tol=1e-9)


def test_the_eager_share_of_a_layer_shrinks_as_its_gemms_grow() -> None:
    # the extra traffic grows with tokens x width, the GEMMs with tokens x width^2: wider models lose less
    ratios = []
    for hidden in (2048, 4096, 8192):
        model = model_from_fields({"architecture": "decoder_only", "num_layers": 2, "hidden_size": hidden,
                                   "num_attention_heads": hidden // 128, "ffn_hidden_size": 3 * hidden,
                                   "vocab_size": 32000, "seq_length": 4096, "attention": "flash",
                                   "activation": "swiglu", "tied_embeddings": False})
        fused = transformer_layer_ops(model, 1, 1, False, model.main_layer())
        eager = transformer_layer_ops(model, 1, 1, False, model.main_layer(), eager=True)
        ratios.append(ops_time(eager, H100, FITTED) / ops_time(fused, H100, FITTED))
    assert ratios[0] > ratios[1] > ratios[2] > 1.0


REQUEST: dict[str, Any] = {
    "model": {"preset": "llama3-8b", "seq_length": 4096},
    "cluster": {"preset": "dgx-h100", "num_nodes": 1},
    "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 1, "global_batch_size": 16, "zero_stage": 3,
               "zero_implementation": "fsdp"},
}


def test_an_eager_request_is_slower_and_the_default_is_fused() -> None:
    fused = convert.to_scenario(SimulationRequest.model_validate(REQUEST))
    assert fused.layout.elementwise_kernels is None and not fused.layout.eager
    doc = {**REQUEST, "layout": {**REQUEST["layout"], "elementwise_kernels": "eager"}}
    eager = convert.to_scenario(SimulationRequest.model_validate(doc))
    assert eager.layout.elementwise_kernels is ElementwiseKernels.EAGER
    assert simulate(eager).metrics.iteration_time_s > simulate(fused).metrics.iteration_time_s
    explicit = {**REQUEST, "layout": {**REQUEST["layout"], "elementwise_kernels": "fused"}}
    assert math.isclose(simulate(convert.to_scenario(SimulationRequest.model_validate(explicit))).metrics
                        .iteration_time_s, simulate(fused).metrics.iteration_time_s, rel_tol=1e-12)


def test_an_unknown_value_is_refused_naming_the_field() -> None:
    doc = {**REQUEST, "layout": {**REQUEST["layout"], "elementwise_kernels": "compiled"}}
    with pytest.raises(ValueError, match="elementwise_kernels"):
        SimulationRequest.model_validate(doc)


def test_torchtitan_rows_without_compile_run_eager() -> None:
    def row(compiled: bool) -> dict[str, Any]:
        return {"id": "tt2412-x", "model": {"arch": "llama (GQA, SwiGLU)", "layers": 32, "hidden": 4096, "heads": 32,
                                            "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq_len": 8192},
                "cluster": {"gpu": "h100-96gb-hbm2e", "num_gpus": 8},
                "layout": {"fsdp": 8, "dp": 8, "tp": 1, "pp": 1, "microbatch_size": 2, "global_batch": 16,
                           "precision": "BF16", "torch_compile": compiled}}

    assert modern.scenario_for(row(False)).layout.eager
    assert not modern.scenario_for(row(True)).layout.eager
