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
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

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

Size = Annotated[StrictInt, Field(ge=1)]
"""A count: int >= 1."""
PositiveFloat = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]

# Physical maxima, far beyond any machine or model built (and far beyond the presets): a value past one describes
# nothing real, and would only make the simulator build or loop over it (a graph node per NIC, a partition
# search over layers). Each is named in the field's "must be <= N" rule.
Layers = Annotated[StrictInt, Field(ge=1, le=10_000)]
Width = Annotated[StrictInt, Field(ge=1, le=2**20)]  # hidden, FFN and head sizes
Heads = Annotated[StrictInt, Field(ge=1, le=65_536)]
Vocabulary = Annotated[StrictInt, Field(ge=1, le=2**24)]
Tokens = Annotated[StrictInt, Field(ge=1, le=2**24)]  # a sample's sequence
GpusPerNode = Annotated[StrictInt, Field(ge=1, le=1_024)]
NicsPerNode = Annotated[StrictInt, Field(ge=1, le=64)]
DomainGpus = Annotated[StrictInt, Field(ge=1, le=65_536)]
Tflops = Annotated[StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)]  # a GPU's peak, TFLOP/s
GBps = Annotated[StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)]  # GB/s of memory or NVLink
Gbitps = Annotated[StrictFloat, Field(gt=0, le=1e7, allow_inf_nan=False)]  # a NIC's Gbit/s
Samples = Annotated[StrictInt, Field(ge=1, le=2**24)]  # a batch
LatencyUs = Annotated[StrictFloat, Field(ge=0, le=1e6, allow_inf_nan=False)]  # up to a second per hop

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


class GpuSpecIn(BaseModel):
    """A user-defined GPU. GEMM efficiencies come from the catalog GPU nearest in 16-bit peak (a warning says so)."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(default="custom", description="what messages call it")
    peak_tflops_bf16: Tflops | None = Field(default=None, description="dense 16-bit tensor peak, TFLOP/s")
    peak_tflops_fp8: NonNegativeFloat | None = Field(
        default=None, description="dense FP8 tensor peak, TFLOP/s; 0 = no FP8 tensor cores"
    )
    memory_gib: PositiveFloat | None = Field(default=None, description="HBM capacity, GiB")
    hbm_bandwidth_gb_per_s: GBps | None = Field(default=None, description="HBM bandwidth, GB/s")
    tdp_w: PositiveFloat | None = Field(default=None, description="board power, W")
    nvlink_bandwidth_gb_per_s: GBps | None = Field(
        default=None, description="per GPU, per direction; default the cluster's"
    )


GpuIndex = Annotated[StrictInt, Field(ge=0, le=2**31)]
BandwidthFactor = Annotated[StrictFloat, Field(gt=0, le=1, allow_inf_nan=False)]


class SlowGpuIn(BaseModel):
    """A GPU whose compute takes longer than its peers' (a straggler)."""

    model_config = ConfigDict(extra="forbid")

    gpu: GpuIndex = Field(description="global GPU index: node x gpus_per_node + local index")
    compute_time_factor: Annotated[StrictFloat, Field(gt=0, le=100, allow_inf_nan=False)] = Field(
        description="its compute takes this many times as long (1.2: 20% longer)")


class DegradedLinkIn(BaseModel):
    """A link carrying less than its rate: a node's NIC (node and nic) or a GPU's NVLink port (gpu)."""

    model_config = ConfigDict(extra="forbid")

    node: GpuIndex | None = None
    nic: GpuIndex | None = None
    gpu: GpuIndex | None = None
    bandwidth_factor: BandwidthFactor = Field(description="the share of its bandwidth it still carries")


class ClusterIn(BaseModel):
    """The cluster: a preset plus num_nodes or num_gpus, or the hardware fields (bandwidth, latency)."""

    model_config = ConfigDict(extra="forbid")

    preset: StrictStr | None = Field(default=None, description="a cluster preset, e.g. dgx-a100")
    num_nodes: Size | None = Field(default=None, description="whole nodes")
    num_gpus: Size | None = Field(default=None, description="any GPU count, a partial node allowed")
    gpu: Literal["v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "b200-180gb",
                 "gb200-186gb"] | None = None
    gpu_spec: GpuSpecIn | None = Field(default=None, description="a user-defined GPU instead of a catalog one")
    nvlink_domain_gpus: DomainGpus | None = Field(
        default=None, description="GPUs sharing one NVLink switch domain, whole nodes; default the node"
    )
    gpus_per_node: GpusPerNode | None = None
    nvlink_bandwidth_gb_per_s: GBps | None = Field(
        default=None, description="GB/s (10^9 bytes) per GPU, per direction, through the node's switch"
    )
    nics_per_node: NicsPerNode | None = None
    nic_bandwidth_gbit_per_s: Gbitps | None = Field(
        default=None, description="Gbit/s (10^9 bits) per NIC, per direction"
    )
    fabric: Literal["fat_tree", "rail_optimized"] | None = Field(
        default=None, description="inter-node network shape"
    )
    oversubscription: Annotated[StrictFloat, Field(ge=1, le=1_024, allow_inf_nan=False)] | None = Field(
        default=None, description="1 = full bisection"
    )
    intra_node_latency_us: LatencyUs | None = Field(default=None, description="microseconds per hop")
    inter_node_latency_us: LatencyUs | None = Field(default=None, description="microseconds per hop")
    slow_gpus: list[SlowGpuIn] = Field(default_factory=list, max_length=65536,
                                       description="stragglers: GPUs whose compute takes longer")
    degraded_links: list[DegradedLinkIn] = Field(default_factory=list, max_length=65536,
                                                 description="NICs or NVLink ports carrying less than their rate")
    compute_variability: Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        default=0.0, description="coefficient of variation of the GPUs' compute time; each GPU's factor is drawn "
                                 "from options.seed and its index (log-normal, mean 1)")

    @field_validator("num_gpus")
    @classmethod
    def _one_size(cls, value: int | None, info: ValidationInfo) -> int | None:
        # num_nodes is declared first, so it has been validated when num_gpus is.
        if value is not None and info.data.get("num_nodes") is not None:
            raise ValueError("give num_nodes or num_gpus, not both")
        return value


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
    cp_comm: Literal["p2p", "all_gather"] = Field(
        default="p2p", description="how context-parallel ranks exchange keys and values: p2p = a ring of K/V sends "
        "overlapped with attention (Megatron-Core), all_gather = K/V all-gathered before attention (Llama 3)"
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
    precision: Literal["bf16", "fp16", "fp8"] = Field(
        default="bf16", description="16-bit format; fp16 gradients are reduced in fp16, bf16's in fp32 (Megatron); "
        "fp8: the transformer layers' GEMMs in FP8 (Transformer Engine), the rest bf16"
    )
    fp8_recipe: Literal["tensorwise", "rowwise", "mxfp8", "blockwise"] | None = Field(
        default=None, description="precision fp8 only: how FP8 tensors are scaled; default tensorwise"
    )
    ep: Size = Field(default=1, description="expert parallelism (MoE); ep * expert_tp divides tp * dp")
    expert_tp: Size = Field(default=1, description="the experts' tensor parallelism (MoE)")
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
        default="ring",
        description="auto: NCCL's choice of algorithm and protocol for each collective; or the all-reduce algorithm",
    )
    extrapolate: StrictBool = Field(default=True, description="false: every steady-state period simulated")


class CheckpointIn(BaseModel):
    """How checkpoints are written: an interval (seconds of training between checkpoints, or `auto` for Daly's
    optimum) and the write speed (per node, every node writing its shard at once) or the write time."""

    model_config = ConfigDict(extra="forbid")

    interval_s: PositiveFloat | Literal["auto"] = Field(
        default="auto", description="seconds of training between checkpoints, or auto (Daly 2006's optimum)"
    )
    write_gb_per_s_per_node: PositiveFloat | None = Field(
        default=None, description="write bandwidth per node, GB/s; every node writes its shard at once"
    )
    write_s: NonNegativeFloat | None = Field(default=None, description="the write time of one checkpoint, seconds")


class FailuresIn(BaseModel):
    """Interruptions: a mean time between failures per GPU or per node, and the restart time."""

    model_config = ConfigDict(extra="forbid")

    mtbf_hours_per_gpu: PositiveFloat | None = None
    mtbf_hours_per_node: PositiveFloat | None = None
    restart_s: NonNegativeFloat = Field(description="time to restart the job and reload the last checkpoint, seconds")


class TrainingIn(BaseModel):
    """A whole training run: the result then carries a `training` section (days, GPU-hours, cost, energy)."""

    model_config = ConfigDict(extra="forbid")

    tokens: PositiveFloat | None = Field(default=None, description="tokens to train on")
    tokens_per_parameter: PositiveFloat | None = Field(
        default=None, description="tokens per model parameter (20 is Chinchilla's)"
    )
    gpu_hour_usd: NonNegativeFloat | None = Field(default=None, description="price of one GPU-hour, USD")
    gpu_power_w: PositiveFloat | None = Field(default=None, description="power per GPU, W; default the GPU's TDP")
    pue: Annotated[StrictFloat, Field(ge=1, allow_inf_nan=False)] = Field(
        default=1.0, description="power usage effectiveness; 1 counts the GPUs' own draw only"
    )
    checkpoint: CheckpointIn | None = None
    failures: FailuresIn | None = None


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
    options: OptionsIn = Field(default_factory=OptionsIn)
    training: TrainingIn | None = Field(default=None, description="optional: a whole training run")
