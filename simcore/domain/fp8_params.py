"""FP8 parameters (`layout.fp8_param_gather`): the transformer layers' GEMM weights kept as FP8 tensors, with no
16-bit copy, and all-gathered over the data-parallel group as FP8 (Megatron-LM's --fp8-param-gather; torchtitan's
`[quantize.linear.float8] enable_fsdp_float8_all_gather` for FSDP).

Megatron-LM (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553): megatron/training/arguments.py
validate_args asserts --fp8-param-gather only with --use-distributed-optimizer, torch FSDP2 or Megatron-FSDP, and
TransformerConfig refuses fp8_param without fp8 (transformer/transformer_config.py). The model is built under
Transformer Engine's fp8_model_init, so its GEMM weights are FP8 tensors; megatron/core/distributed/
param_and_grad_buffer.py (group_params_for_buffers) gives them a uint8 parameter buffer, which the distributed
optimizer fills from its fp32 master shard (optimizer/distrib_optimizer.py -> fp8_utils.quantize_param_shard) and
all-gathers: 1 byte a weight for the tensorwise (delayed or current scaling) and blockwise recipes, whose transpose
or column-wise copy is made after the gather (fp8_utils.post_all_gather_processing). MXFP8 weights are the
exception: their buffer is a bf16 view of the gradient buffer that the fp32 master weights are copied into and
all-gathered, then quantized on each rank (param_and_grad_buffer.py's shared buffer; distrib_optimizer.py
_copy_main_params_to_param_buffer: "param buffer is not mapped to model params for MXFP8"): no 16-bit weight is
kept, but the gather moves 2 bytes a weight. Embeddings, norms and the output layer stay 16-bit in every recipe.
Neither Megatron-LM nor torchao gathers row-wise scaled FP8 weights: torchao's Float8LinearConfig asserts
enable_fsdp_float8_all_gather with tensorwise scaling only, and torchtitan (the TOML-era job config the importer
reads) passes it only without a recipe_name and with data_parallel_shard_degree > 1.

`layout.fp8_params`: the same FP8 parameters for a LoRA run's frozen base (Transformer Engine's fp8_model_init,
NeMo's `fp8_params`), which has no optimizer shard to gather from: NVIDIA's MLPerf llama2_70b_lora implementations
build the model under it (v4.0/v4.1 NeMo 1: megatron_gpt_peft_tuning_config.yaml `fp8_params: ${FP8}`; v5.0
custom_llama.py `with torch.no_grad(), te.fp8_model_init()`; v5.1 the same under `cfg.model.fp8`, its
configs FP8_PARAM_GATHER=0). The projections' weights are then FP8 tensors (1 byte, with the transpose or
column-wise copy the recipe keeps: simcore/cost/compute/fp8.py FP8_WEIGHT_COPY_BYTES) and no 16-bit copy exists;
embeddings, norms and the output layer stay 16-bit (simcore/cost/memory.py).

`layout.fp8_attention` (simcore/cost/compute/fp8_attention.py) needs low-precision GEMMs and the fused kernel.
"""

from __future__ import annotations

from topology.errors import SpecError

__all__ = ["FP8_PARAM_GATHER_BYTES", "validate_fp8_options", "validate_fp8_param_gather"]

# Bytes each FP8 GEMM weight moves in the parameter all-gather, per recipe (rowwise: not gathered as FP8).
FP8_PARAM_GATHER_BYTES = {"tensorwise": 1.0, "tensorwise_current": 1.0, "blockwise": 1.0, "mxfp8": 2.0}


def validate_fp8_param_gather(enabled: bool, precision: str, recipe: str | None, zero_stage: int,
                              implementation: str) -> None:
    """Raise SpecError naming `layout.fp8_param_gather` where the layout cannot keep FP8 parameters: precision
    not fp8, no sharded data parallelism (ZeRO 0), DeepSpeed's ZeRO 3, or row-wise scaling."""
    if not enabled:
        return
    field = "layout.fp8_param_gather"
    if precision != "fp8":
        raise SpecError(field, f"needs precision fp8 (FP8 GEMM weights; this layout is {precision}): Megatron-Core "
                        "refuses fp8_param without fp8")
    if zero_stage == 0:
        raise SpecError(field, "needs zero_stage 1, 2 or 3: Megatron-LM runs --fp8-param-gather only with the "
                        "distributed optimizer or FSDP (zero_stage 0 gathers no parameters)")
    if implementation in ("deepspeed", "deepspeed_2021"):
        raise SpecError(field, f"applies to zero_implementation megatron or fsdp (DeepSpeed's ZeRO 3 gathers "
                        f"16-bit parameters), not {implementation}")
    if implementation == "fsdp" and (recipe or "tensorwise") != "tensorwise":
        raise SpecError(field, "with zero_implementation fsdp needs fp8_recipe tensorwise (torchao's "
                        "Float8LinearConfig allows enable_fsdp_float8_all_gather with tensorwise scaling only), not "
                        f"{recipe}")
    if (recipe or "tensorwise") not in FP8_PARAM_GATHER_BYTES:
        raise SpecError(field, f"is not available with fp8_recipe {recipe} (Megatron-LM has no row-wise recipe; "
                        "torchao gathers FP8 weights with tensorwise scaling only): use tensorwise, blockwise or "
                        "mxfp8")


def validate_fp8_options(attention: bool, params: bool, precision: str, recipe: str | None, model: object) -> None:
    """Raise SpecError naming `layout.fp8_attention` or `layout.fp8_params` where the layout cannot run them: FP8
    attention needs precision fp8, mxfp8 or nvfp4 (not fp8_recipe rowwise) and model.attention flash; FP8
    parameters for a frozen base need precision fp8 or mxfp8 (not rowwise) and model.lora."""
    low = precision in ("fp8", "mxfp8", "nvfp4")
    if attention:
        field = "layout.fp8_attention"
        if not low:
            raise SpecError(field, f"needs precision fp8, mxfp8 or nvfp4 (Transformer Engine runs FP8 attention "
                            f"inside an FP8 recipe; this layout is {precision})")
        if recipe == "rowwise":
            raise SpecError(field, "is not available with fp8_recipe rowwise (torchao's recipe has no FP8 attention)")
        if str(getattr(model, "attention", "")) != "flash":
            raise SpecError(field, "needs model.attention flash (FP8 attention is a fused kernel: cuDNN's FP8 "
                            "flash attention)")
    if params:
        field = "layout.fp8_params"
        if precision not in ("fp8", "mxfp8") or recipe == "rowwise":
            raise SpecError(field, f"needs precision fp8 (tensorwise, blockwise or mxfp8 scaling) for FP8 weights "
                            f"(fp8_model_init); this layout is {precision}{' ' + recipe if recipe else ''}")
        if getattr(model, "lora", None) is None:
            raise SpecError(field, "applies to model.lora's frozen base; for trained weights use fp8_param_gather "
                            "(the FP8 weights come from the distributed optimizer's fp32 master shards)")
