"""Which part of a backward pass computes weight gradients (W, what zero-bubble schedules defer) and which
computes input gradients (B, what the previous pipeline stage waits for)."""

from __future__ import annotations

from simcore.cost.compute.kernel_time import op_time, weight_gradient_time
from simcore.cost.compute.kernels import LATENT_AND_EXPERT_PROJECTIONS, PROJECTIONS, Op
from simcore.cost.compute.lora import ADAPTER_PREFIXES
from simcore.cost.parameters import CostParameters
from topology.hardware import GpuSpec

__all__ = ["WEIGHT_GEMMS", "weight_share"]

# The GEMMs that multiply by a weight: the projections (multi-head latent attention's, the experts' and the
# router's included), the output layer (the logits) and multi-token prediction's projection (simcore/cost/mtp.py).
WEIGHT_GEMMS = (*PROJECTIONS, *LATENT_AND_EXPERT_PROJECTIONS, "router", "logits", "mtp_eh_proj")


def weight_share(backward_ops: tuple[Op, ...], gpu: GpuSpec, params: CostParameters) -> float:
    """The share of a backward pass's kernel time that computes weight gradients (W). A weight's backward GEMM
    (`Op.backward`: twice the forward FLOPs) is two products of equal FLOPs, dX = dY W^T and dW = X^T dY: with the
    GEMM shape model its W time is dW's by its own shape (k = the tokens), else half of its time. The attention
    core's batched products have no weights (both their gradients are input gradients), nor have the
    memory-bound kernels: they are B. A frozen weight's GEMM (LoRA) has no W; its adapters' GEMMs (lora_a_*,
    lora_b_*) have. Qi et al. 2024 (Zero Bubble), section 2."""
    times = [op_time(op, gpu, params) for op in backward_ops]
    total = sum(times)
    if total <= 0:
        return 0.0
    weights = sum(weight_gradient_time(op, gpu, params) for op in backward_ops
                  if op.name.removesuffix("_bwd") in WEIGHT_GEMMS or op.name.startswith(ADAPTER_PREFIXES))
    return weights / total
