"""The request document (contract: Request): model, cluster, parallel layout and options.

Only per-field rules live here (types, ranges, enums, the placement spelling, num_nodes xor num_gpus).
Rules that need preset values or several sections (dp * tp * pp = GPUs, tp divides the heads, the batch
divides into microbatches) belong to the domain layer. Unknown fields are rejected by name; ints and bools
are strict (no ``"8"``, ``2.5`` or ``"yes"``), floats also take ints. Units are in the field names.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)
from pydantic_core import PydanticCustomError

from api_schemas.cluster import ClusterIn, GpuSpecIn, PositiveFloat, Size
from api_schemas.training import TrainingIn

__all__ = [
    "OPTIONAL_PARALLEL_DIMENSIONS",
    "PARALLEL_DIMENSIONS",
    "ClusterIn",
    "GpuSpecIn",
    "LayoutIn",
    "ModelIn",
    "OptionsIn",
    "SimulationRequest",
    "TrainingIn",
    "placement_is_permutation",
]


# Physical maxima, far beyond any machine or model built (and far beyond the presets): a value past one describes
# nothing real, and would only make the simulator build or loop over it (a graph node per NIC, a partition
# search over layers). Each is named in the field's "must be <= N" rule.
Layers = Annotated[StrictInt, Field(ge=1, le=10_000)]
Width = Annotated[StrictInt, Field(ge=1, le=2**20)]  # hidden, FFN and head sizes
Heads = Annotated[StrictInt, Field(ge=1, le=65_536)]
Vocabulary = Annotated[StrictInt, Field(ge=1, le=2**24)]
Tokens = Annotated[StrictInt, Field(ge=1, le=2**24)]  # a sample's sequence
Samples = Annotated[StrictInt, Field(ge=1, le=2**24)]  # a batch

# The parallel dimensions that `placement` orders, innermost first; cp may be left out (it then goes right after
# tp, Megatron-Core's order tp-cp-dp-pp).
PARALLEL_DIMENSIONS: tuple[str, ...] = ("dp", "tp", "pp")
OPTIONAL_PARALLEL_DIMENSIONS: tuple[str, ...] = ("cp",)


def placement_is_permutation(value: str) -> str:
    """The placement spelled canonically, or ValueError: dp, tp, pp once each and cp at most once."""
    parts = [part.strip() for part in value.split(",")]
    if sorted(p for p in parts if p not in OPTIONAL_PARALLEL_DIMENSIONS) != sorted(PARALLEL_DIMENSIONS) or any(
            parts.count(p) > 1 for p in OPTIONAL_PARALLEL_DIMENSIONS):
        raise ValueError(
            "must list dp, tp and pp once each (and cp at most once), comma-separated, innermost first "
            "(e.g. 'tp,cp,dp,pp')"
        )
    return ",".join(parts)


def _strict_zero_stage(value: Any) -> Any:
    # Literal[0, 1, 2, 3] alone accepts True and 1.0 (they compare equal to 1); a stage is an int.
    if type(value) is not int:
        raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": "0, 1, 2 or 3"})
    return value


ZeroStage = Annotated[Literal[0, 1, 2, 3], BeforeValidator(_strict_zero_stage)]


class LoraIn(BaseModel):
    """LoRA fine-tuning: low-rank adapters on a frozen base model (docs/contract-lora.md)."""

    model_config = ConfigDict(extra="forbid")

    rank: Size = Field(description="the adapters' rank r; at most hidden_size")
    targets: list[Literal["qkv", "proj", "fc1", "fc2"]] = Field(
        default=["qkv", "proj"], min_length=1,
        description="the projections adapted: qkv (fused Q/K/V), proj (attention output), fc1, fc2 (the MLP's); "
        "default the attention's, as MLPerf's llama2_70b_lora")
    dropout: Annotated[StrictFloat, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        default=0.0, description="dropout on the adapters' input (PEFT's lora_dropout)")


class ModelIn(BaseModel):
    """The model to train: a preset, or its shape; fields given beside a preset override it."""

    model_config = ConfigDict(extra="forbid")

    preset: StrictStr | None = Field(default=None, description="a model preset, e.g. gpt3-1.3b")
    architecture: Literal["decoder_only", "encoder_decoder", "encoder_only"] | None = None
    num_layers: Layers | None = Field(default=None, description="decoder_only and encoder_only")
    encoder_layers: Layers | None = Field(default=None, description="encoder_decoder")
    decoder_layers: Layers | None = Field(default=None, description="encoder_decoder")
    hidden_size: Width | None = None
    num_attention_heads: Heads | None = None
    num_kv_heads: Heads | None = Field(
        default=None, description="grouped-query attention; default num_attention_heads"
    )
    head_dim: Width | None = Field(default=None, description="default hidden_size / num_attention_heads")
    ffn_hidden_size: Width | None = None
    gated_mlp: StrictBool | None = Field(
        default=None, description="SwiGLU / GeGLU: three MLP matrices instead of two"
    )
    vocab_size: Vocabulary | None = None
    seq_length: Tokens | None = Field(
        default=None, description="tokens per sample (the encoder input for encoder_decoder)"
    )
    decoder_seq_length: Tokens | None = Field(
        default=None, description="encoder_decoder only: target tokens per sample"
    )
    tied_embeddings: StrictBool | None = None
    attention: Literal["standard", "flash"] | None = Field(
        default=None, description="flash never writes the s x s score matrix"
    )
    activation: Literal["gelu", "relu", "squared_relu", "swiglu", "geglu"] | None = Field(
        default=None, description="the MLP's activation; swiglu and geglu are gated (gated_mlp follows them)"
    )
    num_experts: Size | None = Field(default=None, description="mixture of experts: routed experts per MoE layer")
    moe_top_k: Size | None = Field(default=None, description="experts each token is routed to")
    moe_ffn_hidden_size: Size | None = Field(default=None, description="each expert's MLP hidden size")
    num_shared_experts: Annotated[StrictInt, Field(ge=0)] | None = Field(
        default=None, description="always-active experts (default 0)")
    first_dense_layers: Annotated[StrictInt, Field(ge=0)] | None = Field(
        default=None, description="leading layers with a dense MLP (default 0)")
    moe_capacity_factor: PositiveFloat | None = Field(default=None, description="absent = dropless")
    moe_load_imbalance: Annotated[StrictFloat, Field(ge=1, allow_inf_nan=False)] | None = Field(
        default=None, description="the busiest expert rank's tokens over the mean; default 1 (balanced)")
    attention_variant: Literal["mha", "mla"] | None = Field(
        default=None, description="mla: DeepSeek's multi-head latent attention (head_dim is its nope dims)")
    q_lora_rank: Annotated[StrictInt, Field(ge=0)] | None = Field(
        default=None, description="mla: query latent rank; 0 = a direct query projection")
    kv_lora_rank: Size | None = Field(default=None, description="mla: key/value latent rank")
    qk_rope_head_dim: Size | None = Field(default=None, description="mla: rotary dims of each query/key head")
    v_head_dim: Size | None = Field(default=None, description="mla: dims of each value head")
    mtp_layers: Annotated[StrictInt, Field(ge=0)] | None = Field(
        default=None, description="multi-token prediction depths (DeepSeek-V3; Megatron-LM's --mtp-num-layers, "
        "config.json's num_nextn_predict_layers), decoder_only only: each a transformer layer, an embedding, a "
        "2h -> h projection and its own logits on the last pipeline stage; default 0")
    lora: LoraIn | None = Field(
        default=None, description="LoRA fine-tuning: adapters {rank, targets, dropout} on a frozen base")
    hf_config: dict[StrictStr, Any] | None = Field(
        default=None, description="a Hugging Face config.json document in place of the shape fields (its "
        "`architectures` picks the mapping, interop/hf.py); fields given beside it override it")


class Bf16LayersIn(BaseModel):
    """Transformer layers kept in BF16 under a low precision (Megatron-LM's --first-last-layers-bf16)."""

    model_config = ConfigDict(extra="forbid")

    first: Annotated[StrictInt, Field(ge=0, le=10_000)] = Field(
        default=0, description="the model's first layers in BF16 (--num-layers-at-start-in-bf16)")
    last: Annotated[StrictInt, Field(ge=0, le=10_000)] = Field(
        default=0, description="the model's last layers in BF16 (--num-layers-at-end-in-bf16)")


class LayoutIn(BaseModel):
    """The parallel layout: DP/TP/PP degrees, batch, pipeline schedule, ZeRO, recompute and placement."""

    model_config = ConfigDict(extra="forbid")

    dp: Size
    tp: Size
    pp: Size
    cp: Size = Field(
        default=1, description="context parallelism: each sample's sequence split over cp GPUs (Megatron-Core's "
        "--context-parallel-size); dp * tp * pp * cp = GPUs; seq_length divisible by 2 * cp"
    )
    cp_comm: Literal["p2p", "all_gather", "a2a"] = Field(
        default="p2p", description="how context-parallel ranks exchange keys and values: p2p = a ring of K/V sends "
        "overlapped with attention (Megatron-Core), all_gather = K/V all-gathered before attention (Llama 3), a2a = "
        "all-to-alls trading sequence for heads around whole-sequence attention (DeepSpeed-Ulysses; Megatron-LM "
        "--cp-comm-type a2a; needs cp to divide a tensor rank's attention and key/value heads)"
    )
    virtual_stages: Size = Field(
        default=1, description="model chunks per pipeline rank; > 1 only with interleaved_1f1b"
    )
    microbatch_size: Samples = Field(default=1, description="samples per microbatch")
    global_batch_size: Samples = Field(description="samples per iteration; divisible by dp * microbatch_size")
    schedule: Literal["gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zb_h2", "zb_v", "dualpipe"] = Field(
        default="1f1b", description="pipeline schedule; zb_*: zero-bubble schedules, which split each backward "
        "pass into its input gradient (B) and its weight gradient (W) and defer W into the bubble (zb_v: two "
        "chunks per rank in a V); dualpipe: microbatches from both ends, two stages per rank, overlapped "
        "forward-backward pairs"
    )
    sequence_parallel: StrictBool = False
    zero_stage: ZeroStage = 0
    recompute: Literal["none", "selective", "full"] = "none"
    overlap_grad_reduce: StrictBool = False
    placement: StrictStr = Field(
        default="tp,cp,dp,pp", description="order of the parallel dimensions onto GPUs, innermost first (cp may "
        "be left out: it then follows tp)"
    )
    tp_comm_overlap: StrictBool = Field(
        default=False,
        description="overlap tensor-parallel collectives with the GEMMs (Megatron-Core --tp-comm-overlap); "
        "needs sequence_parallel",
    )
    async_tensor_model_parallel_allreduce: StrictBool = Field(
        default=False,
        description="hide each column-parallel projection's input-gradient all-reduce (reduce-scatter with "
        "sequence_parallel) under its weight-gradient GEMM in backward, as Megatron-LM has since 2021-09 "
        "(--no-async-tensor-model-parallel-allreduce turns it off), Megatron-Core and apex/NeMo do; off: every "
        "tensor-parallel collective on the critical path (Megatron-LM before)",
    )
    encoder_pipeline_stages: Size | None = Field(
        default=None, description="encoder_decoder only: pipeline stages holding the encoder; default: chosen by "
        "pipeline_partition (balanced: to balance stage cost; even: in proportion to the layer counts)"
    )
    pipeline_partition: Literal["even", "balanced"] | None = Field(
        default=None,
        description="how layers are cut into pipeline stages: even = by count (Megatron), balanced = by simulated "
        "stage cost (whole layers per stage); default balanced for encoder_decoder, even otherwise",
    )
    zero_implementation: Literal["megatron", "fsdp", "deepspeed", "deepspeed_2021"] = Field(
        default="megatron",
        description="how sharded data parallelism runs: megatron (Megatron-Core; ZeRO 3 gathers one layer at a "
        "time), fsdp (PyTorch FSDP full shard, one unit per transformer layer), deepspeed (DeepSpeed ZeRO 3 since "
        "2022: a coalesced gather per sub-module), deepspeed_2021 (DeepSpeed v0.3-v0.4: a gather per parameter "
        "with device-wide synchronisations); all but megatron need zero_stage 3",
    )
    zero3_gather_bucket_elements: Size | None = Field(
        default=None,
        description="ZeRO 3 with zero_implementation megatron only: gather each layer's parameters in all-gathers "
        "of at most this many elements, one after another; default: one all-gather per layer",
    )
    grad_bucket_elements: Size | None = Field(
        default=None, description="zero_implementation megatron, zero_stage 0-2: Megatron-Core's data-parallel "
        "gradient bucket (--ddp-bucket-size, NeMo's bucket_size), elements; default max(40M, 1M x dp)")
    zero_quantized_weights: StrictBool = Field(
        default=False, description="ZeRO++ qwZ (zero_implementation deepspeed, zero_stage 3): parameter all-gathers "
        "in int8 with fp32 block scales, dequantized after the gather")
    zero_hpz_partition_size: Size = Field(
        default=1, description="ZeRO++ hpZ (zero_implementation deepspeed, zero_stage 3, tp = cp = 1): each rank "
        "keeps a 16-bit secondary shard over this many consecutive ranks and the backward's gathers stay in that "
        "group; must divide dp; 1: off")
    zero_quantized_gradients: StrictBool = Field(
        default=False, description="ZeRO++ qgZ (zero_implementation deepspeed, zero_stage 3, tp = cp = 1, dp a "
        "multiple of the GPUs per node): 2-D gradients averaged by int4 all-to-alls inside each node, then across "
        "nodes")
    zero_shard_size: Size | None = Field(
        default=None, description="hybrid sharding over groups of this many consecutive data-parallel ranks (a "
        "node's GPUs with tp 1), the dp / zero_shard_size groups replicas that all-reduce their gradient shards: "
        "with zero_stage 3 and fsdp, HSDP (PyTorch FSDP's HYBRID_SHARD, torchtitan's data_parallel_shard_degree); "
        "with zero_stage 1 and megatron, Megatron-Core's partial distributed optimizer "
        "(--num-distributed-optimizer-instances dp / zero_shard_size); must divide dp; below dp needs cp = ep = 1; "
        "default dp: full sharding")
    precision: Literal["bf16", "fp16", "fp8", "mxfp8", "nvfp4"] = Field(
        default="bf16", description="16-bit format; fp16 gradients are reduced in fp16, bf16's in fp32 (Megatron); "
        "fp8: the transformer layers' GEMMs in FP8 (Transformer Engine), the rest bf16; mxfp8: fp8 with the mxfp8 "
        "recipe (Blackwell); nvfp4: the projections' GEMMs in NVFP4 (Transformer Engine's NVFP4BlockScaling; a GPU "
        "with FP4 tensor cores)"
    )
    fp8_recipe: Literal["tensorwise", "rowwise", "mxfp8", "blockwise"] | None = Field(
        default=None, description="precision fp8 only: how FP8 tensors are scaled; default tensorwise"
    )
    fp8_scaling: Literal["delayed", "current"] | None = Field(
        default=None, description="fp8_recipe tensorwise only: where each tensor's scale comes from: delayed (the "
        "default; Transformer Engine's DelayedScaling, from earlier iterations' amax history) or current "
        "(Float8CurrentScaling, Megatron-Core's --fp8-recipe tensorwise, torchao's float8: from the tensor's own "
        "amax, one more pass over most tensors)"
    )
    grad_reduce_dtype: Literal["fp32", "bf16", "fp16"] | None = Field(
        default=None, description="the dtype data-parallel gradients are reduced in: fp32 or the parameters' "
        "16-bit type (bf16 for bf16 and fp8 training, fp16 for fp16); default fp32 for bf16 and fp8 (Megatron-LM's "
        "default; torchtitan's FSDP too), fp16 for fp16, the 16-bit type for DeepSpeed's ZeRO 3; bf16 is "
        "Megatron-LM's --grad-reduce-in-bf16: half the data-parallel gradient bytes"
    )
    fp8_param_gather: StrictBool = Field(
        default=False, description="precision fp8 with zero_stage 1-3 (megatron or fsdp): keep the FP8 GEMM weights "
        "as FP8 parameters, without a 16-bit copy, and all-gather them in FP8 (1 byte a weight; mxfp8's gather stays "
        "16-bit in Megatron-Core): Megatron-LM's --fp8-param-gather, torchtitan's enable_fsdp_float8_all_gather"
    )
    fp8_attention: StrictBool = Field(
        default=False, description="precision fp8, mxfp8 or nvfp4 with model.attention flash: run the fused "
        "attention in FP8 (Transformer Engine's fp8_dpa, cuDNN's FP8 flash attention; NeMo's "
        "fp8_dot_product_attention): QK^T and PV and their gradients on FP8 operands at the FP8/BF16 GEMM ceiling "
        "ratio, Q, K and V kept for backward in FP8, the context-parallel ring's K/V sent in FP8 (per-tensor scaling)"
    )
    fp8_params: StrictBool = Field(
        default=False, description="precision fp8 or mxfp8 with model.lora: the frozen base's GEMM weights built as "
        "FP8 tensors (Transformer Engine's fp8_model_init; NeMo's fp8_params), without their 16-bit copy"
    )
    fp8_weight_cache: StrictBool = Field(
        default=True, description="precision fp8, mxfp8 or nvfp4: Transformer Engine keeps each weight's FP8 copy "
        "(and the transpose the backward GEMM needs) across a step's microbatches; false: Megatron-Core's "
        "disable_parameter_transpose_cache, the copies quantized (FP8 weights: transposed, Transformer Engine 1.x) "
        "again every microbatch"
    )
    bf16_layers: Bf16LayersIn | None = Field(
        default=None, description="precision fp8, mxfp8 or nvfp4, single-stack models: the first and last "
        "transformer layers run as BF16 training runs them (their GEMMs and attention in BF16, no FP8/FP4 weight "
        "copies), Megatron-LM's --first-last-layers-bf16; first + last at most the model's layers; default none: "
        "every layer in layout.precision"
    )
    ep: Size = Field(default=1, description="expert parallelism (MoE); ep * expert_tp divides tp * dp")
    expert_tp: Size = Field(default=1, description="the experts' tensor parallelism (MoE)")
    elementwise_kernels: Literal["fused", "eager"] | None = Field(
        default=None, description="how the layers' norms, rotary embedding and gated activation run: fused kernels "
        "(Transformer Engine, torch.compile) or PyTorch eager ops, one kernel per tensor op (torchtitan without "
        "compile); default fused"
    )
    attention_backend: Literal["fused", "flash2"] = Field(
        default="fused", description="the fused attention kernel the framework runs: fused, Transformer Engine's "
        "cuDNN attention (Megatron-Core, NeMo); flash2, FlashAttention-2's kernels, PyTorch scaled_dot_product_"
        "attention's default on Hopper until cuDNN's backend became its preference (measured at about half cuDNN's "
        "rate there; priced 1.3-1.6x the default's time for a large kernel, never faster; on Ampere and Ada the two "
        "are priced alike); flash2 needs model.attention flash, no "
        "fp8_attention, no MLA, an Ampere, Ada or Hopper GPU"
    )
    optimizer_post_validation: StrictBool = Field(
        default=False, description="Zero Bubble's post-validation: step the optimizer without the barrier before "
        "it and validate the global checks afterwards; consecutive iterations then overlap (two are simulated, the "
        "steady-state period is iteration_time_s)"
    )
    stage_layers: list[StrictInt] | None = Field(
        default=None, description="layers of each pipeline stage (of each model chunk, in pipeline order, when a "
        "rank holds several), adding up to the model's layers; overrides pipeline_partition"
    )

    @field_validator("placement")
    @classmethod
    def _placement_is_permutation(cls, value: str) -> str:
        return placement_is_permutation(value)


class OptionsIn(BaseModel):
    """How to simulate: fidelity, trace, seed, the collective algorithm and steady-state extrapolation."""

    model_config = ConfigDict(extra="forbid")

    fidelity: Literal["representative", "full"] = Field(
        default="representative",
        description="full: every rank simulated; representative: one rank per symmetry class",
    )
    trace: StrictBool = Field(default=False, description="the API then includes a Chrome trace")
    seed: StrictInt = 0
    collective_algorithm: Literal["auto", "ring", "tree", "hierarchical"] = Field(
        default="auto",
        description="auto: NCCL's choice of algorithm and protocol for each collective; or the all-reduce algorithm",
    )
    extrapolate: StrictBool = Field(default=True, description="false: every steady-state period simulated")


class SimulationRequest(BaseModel):
    """One request document; the CLI (JSON or YAML file) and the HTTP API take the same."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": {"preset": "gpt3-1.3b"},
                    "cluster": {"preset": "dgx-a100", "num_nodes": 1},
                    "layout": {"dp": 2, "tp": 4, "pp": 1, "global_batch_size": 16},
                }
            ]
        },
    )

    model: ModelIn
    cluster: ClusterIn
    layout: LayoutIn
    options: OptionsIn = Field(default_factory=OptionsIn, json_schema_extra={"default": {}})
    training: TrainingIn | None = Field(default=None, description="optional: a whole training run")
