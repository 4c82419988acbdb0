"""The dtype data-parallel gradients are reduced in (`layout.grad_reduce_dtype`), and what each precision and
sharding implementation does by default."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GRAD_REDUCE_BYTES", "GRAD_REDUCE_DTYPE_BYTES", "PARAMETER_DTYPE", "GradReduce",
           "default_grad_reduce"]

# Bytes per gradient element in the data-parallel reduction: Megatron reduces bf16 training's gradients in fp32
# (validate_args sets --accumulate-allreduce-grads-in-fp32 for bf16 unless --grad-reduce-in-bf16) and fp16
# training's in fp16 (its default). FP8 training is bf16 training whose GEMMs run in FP8 (Transformer Engine):
# its gradients are bf16's, and so are MXFP8's and NVFP4's (their GEMMs' operands are quantized, never the weights'
# gradients: Transformer Engine's NVFP4 recipe keeps bf16 parameters and fp32 main gradients).
GRAD_REDUCE_BYTES = {"bf16": 4, "fp16": 2, "fp8": 4, "mxfp8": 4, "nvfp4": 4}


class GradReduce(StrEnum):
    """The dtype data-parallel gradients are reduced in: Megatron-Core's gradient buffer dtype, fp32 when
    DistributedDataParallelConfig.grad_reduce_in_fp32, else the parameters' (megatron/core/distributed/
    param_and_grad_buffer.py group_params_for_buffers). Megatron-LM sets it fp32 for bf16 unless
    --grad-reduce-in-bf16 (megatron/training/arguments.py validate_args), and for fp16 only with
    --accumulate-allreduce-grads-in-fp32."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


GRAD_REDUCE_DTYPE_BYTES = {GradReduce.FP32: 4, GradReduce.BF16: 2, GradReduce.FP16: 2}
# The parameters' 16-bit type of each precision (FP8 training keeps bf16 parameters): the other dtype a gradient
# can be reduced in.
PARAMETER_DTYPE = {"bf16": GradReduce.BF16, "fp16": GradReduce.FP16, "fp8": GradReduce.BF16, "mxfp8": GradReduce.BF16,
                   "nvfp4": GradReduce.BF16}


def default_grad_reduce(precision: str, implementation: str) -> GradReduce:
    """The dtype gradients are reduced in when the layout does not say: fp32 for bf16 and FP8 training, fp16 for
    fp16 (Megatron-LM's defaults, GRAD_REDUCE_BYTES; torchtitan's FSDP reduces in float32 too, its
    mixed_precision_reduce); DeepSpeed's ZeRO 3 (`implementation` deepspeed or deepspeed_2021) the parameters'
    16-bit type (its communication_data_type default; simcore/engine/data_parallel/sharded.py)."""
    if implementation in ("deepspeed", "deepspeed_2021"):
        return PARAMETER_DTYPE[precision]
    return GradReduce.FP32 if GRAD_REDUCE_BYTES[precision] == 4 else PARAMETER_DTYPE[precision]
