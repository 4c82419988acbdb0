"""The parallel layout (domain object) and the rules that tie it to a model and a cluster."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from simcore.domain.attention_backend import AttentionBackend, validate_attention_backend, validate_backend_gpu
from simcore.domain.bf16_layers import validate_model_precision
from simcore.domain.context_parallel import CpComm, validate_context_parallel
from simcore.domain.fp8_params import validate_fp8_param_gather
from simcore.domain.grad_reduce import (
    GRAD_REDUCE_BYTES,
    GRAD_REDUCE_DTYPE_BYTES,
    PARAMETER_DTYPE,
    GradReduce,
    default_grad_reduce,
)
from simcore.domain.hybrid_shard import validate_hybrid_shard
from simcore.domain.model import ModelShape
from simcore.domain.moe import validate_expert_layout
from simcore.domain.pipeline_shape import PipelineShape, ShapeKind
from simcore.domain.precision import Fp8Recipe, Fp8Scaling, Precision, projection_recipe, validate_fp8_scaling
from simcore.domain.zeropp import validate_zeropp
from topology.errors import SpecError
from topology.hardware import GpuSpec


class Partition(StrEnum):
    """How layers are cut into pipeline stages (simcore/cost/partition.py)."""

    EVEN = "even"
    BALANCED = "balanced"


class Schedule(StrEnum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED_1F1B = "interleaved_1f1b"
    ZB_H1 = "zb_h1"
    ZB_H2 = "zb_h2"
    ZB_V = "zb_v"
    DUALPIPE = "dualpipe"


# The schedules that split the backward pass into input and weight gradients (Qi et al. 2024).
ZERO_BUBBLE = frozenset({Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V})
# Schedules whose ranks hold two model chunks by definition (in a V, or one of each direction).
TWO_CHUNKS = {Schedule.ZB_V: ShapeKind.V, Schedule.DUALPIPE: ShapeKind.DUAL}


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class ElementwiseKernels(StrEnum):
    """How a layer's normalization, rotary embedding and gated activation run (simcore/cost/compute/eager.py)."""

    FUSED = "fused"  # one kernel each: Transformer Engine's fused kernels, or what torch.compile generates
    EAGER = "eager"  # PyTorch eager: every elementwise op of the model's Python code is its own kernel


class ZeroImplementation(StrEnum):
    """How sharded data parallelism runs (simcore/cost/sharding.py gives each one's mechanisms and defaults)."""

    MEGATRON = "megatron"  # Megatron-Core: ZeRO 1 as the distributed optimizer; ZeRO 3 one gather per layer
    FSDP = "fsdp"  # PyTorch FSDP1/FSDP2 full shard, one unit per transformer layer
    DEEPSPEED = "deepspeed"  # DeepSpeed ZeRO 3 since 2022: one coalesced gather per sub-module
    DEEPSPEED_2021 = "deepspeed_2021"  # DeepSpeed v0.3-v0.4: one gather per parameter, device-wide syncs


class Fidelity(StrEnum):
    REPRESENTATIVE = "representative"
    FULL = "full"


class CollectiveAlgorithm(StrEnum):
    AUTO = "auto"  # NCCL's choice of algorithm and protocol per collective (simcore/cost/comm/nccl_tuning.py)
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"


@dataclass(frozen=True, slots=True)
class Layout:
    dp: int
    tp: int
    pp: int
    microbatch_size: int
    global_batch_size: int
    virtual_stages: int = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    sequence_parallel: bool = False
    zero_stage: int = 0
    recompute: Recompute = Recompute.NONE
    overlap_grad_reduce: bool = False
    placement: str = "tp,cp,dp,pp"
    tp_comm_overlap: bool = False  # Megatron-Core's --tp-comm-overlap: TP collectives hidden under the GEMMs
    # Megatron's asynchronous input-gradient collectives of column-parallel projections, hidden under their
    # weight-gradient GEMMs in backward (simcore/cost/tp_async.py); off: every TP collective on the critical path.
    async_tensor_model_parallel_allreduce: bool = False
    precision: Precision = Precision.BF16
    pipeline_partition: Partition | None = None  # how layers are cut into stages; None: cost/partition.py's default
    encoder_pipeline_stages: int | None = None  # encoder-decoder: stages holding the encoder; None: chosen
    zero3_gather_bucket_elements: int | None = None  # ZeRO 3 gathers in buckets this large; None: one per layer
    # Megatron-Core's data-parallel gradient bucket (DistributedDataParallelConfig.bucket_size), elements; None: its
    # default (simcore/cost/comm/grad_buckets.py)
    grad_bucket_elements: int | None = None
    fp8_recipe: Fp8Recipe | None = None  # precision fp8 only; None: tensorwise
    fp8_scaling: Fp8Scaling | None = None  # tensorwise's scales (simcore/domain/precision.py); None: delayed
    cp: int = 1  # context parallelism: each sample's sequence split over cp ranks (Megatron-Core's CP)
    cp_comm: CpComm = CpComm.P2P
    zero_implementation: ZeroImplementation = ZeroImplementation.MEGATRON
    ep: int = 1  # expert parallelism (MoE models): folded over the tp x cp x dp GPUs of each stage
    expert_tp: int = 1  # the experts' own tensor parallelism
    # Layers of each model chunk in pipeline order (virtual stage order); None: cut by pipeline_partition.
    stage_layers: tuple[int, ...] | None = None
    # Zero Bubble's post-validation: each rank steps its optimizer as soon as its own gradients are reduced and
    # the global checks (gradient norm, inf/nan) are validated afterwards, instead of a barrier before the step.
    optimizer_post_validation: bool = False
    elementwise_kernels: ElementwiseKernels | None = None  # None: fused
    grad_reduce_dtype: GradReduce | None = None  # the DP gradient reduction's dtype; None: GRAD_REDUCE_BYTES's
    # FP8 GEMM weights kept without a 16-bit copy and all-gathered in FP8 (simcore/domain/fp8_params.py).
    fp8_param_gather: bool = False
    fp8_attention: bool = False  # the fused attention in FP8 (simcore/cost/compute/fp8_attention.py)
    attention_backend: AttentionBackend = AttentionBackend.FUSED  # simcore/domain/attention_backend.py
    fp8_params: bool = False  # LoRA's frozen GEMM weights built as FP8 tensors (simcore/domain/fp8_params.py)
    fp8_weight_cache: bool = True  # off: FP8 weights made again every microbatch (simcore/cost/compute/weight_cache.py)
    bf16_layers: tuple[int, int] = (0, 0)  # (first, last) layers kept in BF16 (simcore/domain/bf16_layers.py)
    # DeepSpeed's ZeRO++ (simcore/domain/zeropp.py): int8 parameter gathers (qwZ), the backward's gathers from
    # secondary shards over this many ranks (hpZ; 1: off), int4 all-to-all gradient averaging (qgZ)
    zero_quantized_weights: bool = False
    zero_hpz_partition_size: int = 1
    zero_quantized_gradients: bool = False
    zero_shard_size: int | None = None  # HSDP: ZeRO 3 shards over this many ranks (simcore/domain/hybrid_shard.py)

    @property
    def shape(self) -> PipelineShape:
        """Where the schedule puts each model chunk (simcore/domain/pipeline_shape.py)."""
        kind = TWO_CHUNKS.get(self.schedule, ShapeKind.LOOP)
        return PipelineShape(kind, self.pp, 2 if kind is not ShapeKind.LOOP else self.virtual_stages)

    @property
    def fp8(self) -> Fp8Recipe | None:
        """The low-precision recipe the projections' GEMMs run with (simcore/domain/precision.py), or None."""
        return projection_recipe(self.precision, self.fp8_recipe, self.fp8_scaling)

    @property
    def eager(self) -> bool:
        """Whether the layers' elementwise kernels run as PyTorch eager ops (simcore/cost/compute/eager.py)."""
        return self.elementwise_kernels is ElementwiseKernels.EAGER

    @property
    def grad_reduce_bytes(self) -> int:
        """Bytes per gradient element in the data-parallel reduction."""
        if self.grad_reduce_dtype is not None:
            return GRAD_REDUCE_DTYPE_BYTES[self.grad_reduce_dtype]
        return GRAD_REDUCE_BYTES[self.precision]

    @property
    def reduce_dtype(self) -> GradReduce:
        """The gradient reduction's dtype, given or by default (`default_grad_reduce`)."""
        return self.grad_reduce_dtype if self.grad_reduce_dtype is not None else default_grad_reduce(
            self.precision, self.zero_implementation)

    @property
    def num_microbatches(self) -> int:
        """m: microbatches per pipeline per iteration."""
        return self.global_batch_size // (self.dp * self.microbatch_size)

    @property
    def num_gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def dp_cp(self) -> int:
        """The ranks that hold the same weights and reduce their gradients together: DP x CP (Megatron-Core's
        data-parallel group with context parallelism; the distributed optimizer shards over it too)."""
        return self.dp * self.cp

    @property
    def expert_dp(self) -> int:
        """The expert data-parallel group (Megatron-Core's parallel folding): the stage's tp x cp x dp GPUs
        regrouped as expert_tp x ep x expert_dp."""
        return self.tp * self.dp_cp // (self.ep * self.expert_tp)


def validate_layout(layout: Layout, model: ModelShape, num_gpus: int) -> None:
    """Raise SpecError naming the first rule the layout breaks for this model and cluster."""
    for name in ("dp", "tp", "pp", "cp", "microbatch_size", "global_batch_size", "virtual_stages"):
        if getattr(layout, name) < 1:
            raise SpecError(f"layout.{name}", "must be >= 1")
    if layout.num_gpus != num_gpus:
        raise SpecError("layout.dp", f"{gpu_product(layout)} must equal the number of GPUs ({num_gpus})")
    if model.num_attention_heads % layout.tp:
        raise SpecError("layout.tp", f"must divide num_attention_heads ({model.num_attention_heads})")
    if model.num_kv_heads % layout.tp and layout.tp % model.num_kv_heads:
        raise SpecError("layout.tp", f"must divide num_kv_heads ({model.num_kv_heads}) or be a multiple of it")
    if model.ffn_hidden_size % layout.tp:
        raise SpecError("layout.tp", f"must divide ffn_hidden_size ({model.ffn_hidden_size})")
    per_replica = layout.dp * layout.microbatch_size
    if layout.global_batch_size % per_replica:
        raise SpecError("layout.global_batch_size",
                        f"must be divisible by dp*microbatch_size = {per_replica} (microbatches must divide the batch)")
    _validate_encoder_decoder(layout, model)
    validate_context_parallel(layout, model)
    validate_model_precision(layout, model)  # fp8_attention, fp8_params, bf16_layers
    validate_attention_backend(layout, model)
    chunks = layout.pp * layout.virtual_stages
    if chunks > model.num_layers:
        raise SpecError("layout.pp", f"pp*virtual_stages = {chunks} exceeds num_layers ({model.num_layers})")
    _validate_schedule(layout, model)
    if layout.virtual_stages > 1 and layout.schedule is not Schedule.INTERLEAVED_1F1B:
        raise SpecError("layout.virtual_stages", "must be 1 unless schedule is interleaved_1f1b")
    if layout.schedule is Schedule.INTERLEAVED_1F1B:
        if layout.pp < 2:
            raise SpecError("layout.schedule", "interleaved_1f1b needs pp >= 2")
        if layout.num_microbatches % layout.pp:
            raise SpecError("layout.global_batch_size",
                            f"interleaved_1f1b needs the microbatch count ({layout.num_microbatches}) "
                            f"to be a multiple of pp ({layout.pp})")
    _validate_stage_layers(layout, model)
    if layout.sequence_parallel:
        for name in ("seq_length", "decoder_seq_length"):
            if getattr(model, name) % layout.tp:
                raise SpecError("layout.sequence_parallel", f"needs tp to divide {name} ({getattr(model, name)})")
    if layout.tp_comm_overlap and not layout.sequence_parallel:
        raise SpecError("layout.tp_comm_overlap", "needs sequence_parallel (as in Megatron-Core)")
    validate_expert_layout(layout.ep, layout.expert_tp, layout.tp * layout.dp_cp, model.moe)
    if model.moe is not None and layout.tp > 1 and not layout.sequence_parallel:
        raise SpecError("layout.sequence_parallel", "must be true with tp > 1 on a MoE model (Megatron-Core's "
                        "MoE layer works on the sequence-parallel shard)")
    own = PARAMETER_DTYPE[layout.precision]
    if layout.grad_reduce_dtype not in (None, GradReduce.FP32, own):
        raise SpecError("layout.grad_reduce_dtype", f"must be fp32 or the parameters' 16-bit type ({own}) for "
                        f"precision {layout.precision} (given {layout.grad_reduce_dtype})")
    if layout.zero_stage not in (0, 1, 2, 3):
        raise SpecError("layout.zero_stage", "must be 0, 1, 2 or 3")
    if model.moe is not None and layout.zero_implementation is not ZeroImplementation.MEGATRON:
        # its gather units (simcore/cost/sharding.py) hold whole dense layers: no expert sharding over ep
        raise SpecError("layout.zero_implementation", f"{layout.zero_implementation} is not modelled for a "
                        "mixture-of-experts model (use megatron: its ZeRO shards experts over their own group)")
    if layout.zero3_gather_bucket_elements is not None:
        if layout.zero_stage != 3:
            raise SpecError("layout.zero3_gather_bucket_elements", "applies to zero_stage 3 only")
        if layout.zero3_gather_bucket_elements < 1:
            raise SpecError("layout.zero3_gather_bucket_elements", "must be >= 1")
        if layout.zero_implementation is not ZeroImplementation.MEGATRON:
            raise SpecError("layout.zero3_gather_bucket_elements",
                            f"applies to zero_implementation megatron only ({layout.zero_implementation} gathers "
                            "in its own units)")
    if layout.grad_bucket_elements is not None:
        if layout.grad_bucket_elements < 1:
            raise SpecError("layout.grad_bucket_elements", "must be >= 1")
        if layout.zero_stage == 3 or layout.zero_implementation is not ZeroImplementation.MEGATRON:
            raise SpecError("layout.grad_bucket_elements", "applies to zero_implementation megatron with zero_stage "
                            "0, 1 or 2 (ZeRO 3 reduces layer by layer)")
    deepspeed = (ZeroImplementation.DEEPSPEED, ZeroImplementation.DEEPSPEED_2021)
    if layout.zero_implementation in deepspeed and layout.pp > 1:
        # deepspeed/runtime/pipe/engine.py asserts a ZeRO stage below 2 with pipeline parallelism
        raise SpecError("layout.zero_implementation", "DeepSpeed's ZeRO 3 does not run with pipeline "
                        f"parallelism (pp {layout.pp}); use pp 1")
    if layout.zero_implementation is not ZeroImplementation.MEGATRON and layout.zero_stage != 3:
        raise SpecError("layout.zero_implementation",
                        f"{layout.zero_implementation} is modelled for zero_stage 3 (sharded parameters) only; "
                        f"use megatron for zero_stage {layout.zero_stage}")
    validate_zeropp(layout)
    validate_hybrid_shard(layout)


def gpu_product(layout: Layout) -> str:
    """The GPU count a layout asks for, written out: "dp*tp*pp = 2*8*8 = 128" (with cp when cp > 1)."""
    names = ("dp", "tp", "pp", "cp") if layout.cp > 1 else ("dp", "tp", "pp")
    return f"{'*'.join(names)} = {'*'.join(str(getattr(layout, n)) for n in names)} = {layout.num_gpus}"


def validate_precision(layout: Layout, gpu: GpuSpec) -> None:
    """Raise SpecError when the layout's precision, FP8 recipe or attention kernel does not suit the GPU."""
    validate_backend_gpu(layout, gpu)
    if layout.fp8_recipe is not None and layout.precision is not Precision.FP8:
        raise SpecError("layout.fp8_recipe", f"applies to precision fp8 only (this layout is {layout.precision})")
    validate_fp8_param_gather(layout.fp8_param_gather, layout.precision, layout.fp8_recipe, layout.zero_stage,
                              layout.zero_implementation)
    if layout.fp8_recipe is Fp8Recipe.NVFP4:
        raise SpecError("layout.fp8_recipe", "nvfp4 is not an FP8 recipe: use precision nvfp4")
    if layout.fp8_recipe is Fp8Recipe.TENSORWISE_CURRENT:
        raise SpecError("layout.fp8_recipe", "tensorwise_current is not a recipe: use tensorwise with fp8_scaling "
                        "current")
    validate_fp8_scaling(layout.fp8_scaling, layout.precision, layout.fp8_recipe)
    if layout.precision is Precision.NVFP4:
        if not gpu.has_fp4:
            raise SpecError("layout.precision", f"nvfp4 needs a GPU with FP4 tensor cores (Blackwell: B200, GB200, "
                            f"B300, GB300); {gpu.label} has none")
        return
    if layout.fp8 is None:
        return
    if not gpu.has_fp8:
        raise SpecError("layout.precision", f"{layout.precision} needs a GPU with FP8 tensor cores (Hopper or "
                        f"later); {gpu.label} has none")
    if layout.fp8 is Fp8Recipe.MXFP8 and gpu.generation in ("volta", "ampere", "hopper", "ada"):
        field = "layout.precision" if layout.precision is Precision.MXFP8 else "layout.fp8_recipe"
        raise SpecError(field, f"mxfp8 needs Blackwell tensor cores (block-scaled FP8); "
                        f"{gpu.label} is {gpu.generation}")


def _validate_schedule(layout: Layout, model: ModelShape) -> None:
    """The zero-bubble and DualPipe schedules' rules (Qi et al. 2024; DeepSeek-V3 report; deepseek-ai/DualPipe)."""
    schedule, pp, m = layout.schedule, layout.pp, layout.num_microbatches
    if schedule in ZERO_BUBBLE and m < pp:
        raise SpecError("layout.schedule", f"{schedule} needs at least pp ({pp}) microbatches per pipeline, not {m}")
    if schedule in ZERO_BUBBLE or schedule is Schedule.DUALPIPE:
        # Not modelled together: context parallelism's passes run as ring plans of whole backward passes, and
        # per-sub-module sharding (FSDP, DeepSpeed) runs forward and whole backward passes only.
        if layout.cp > 1:
            raise SpecError("layout.cp", f"{schedule} splits or overlaps backward passes, which context "
                            "parallelism's ring passes do not model: use cp = 1 or 1f1b/interleaved_1f1b/gpipe")
        if model.moe is not None and schedule is not Schedule.DUALPIPE:
            # Only DualPipe's overlapped pairs run MoE layers' all-to-alls beside other kernels
            # (simcore/engine/pair_overlap.py); the zero-bubble schedules' deferred W is not split per expert.
            raise SpecError("layout.schedule", f"{schedule} splits backward passes, which MoE layers' expert "
                            "all-to-alls and expert weight gradients do not model: use "
                            "1f1b/interleaved_1f1b/gpipe/dualpipe for a MoE model")
        if layout.zero_implementation is not ZeroImplementation.MEGATRON:
            raise SpecError("layout.zero_implementation", f"{schedule} splits or overlaps backward passes, which "
                            f"{layout.zero_implementation}'s per-sub-module passes do not model: use megatron")
    if schedule not in TWO_CHUNKS:
        return
    if model.encoder_decoder:
        raise SpecError("layout.schedule", f"{schedule} needs a single stack of layers to cut into chunks; "
                        "encoder_decoder models take zb_h1 or zb_h2")
    pieces = layout.shape.pieces
    if pieces > model.num_layers:
        raise SpecError("layout.schedule", f"{schedule} cuts the model into {pieces} chunks, more than its "
                        f"{model.num_layers} layers: every model chunk needs at least one layer")
    if schedule is Schedule.DUALPIPE:
        if pp % 2:
            raise SpecError("layout.schedule", f"dualpipe needs an even pp, not {pp}")
        if m % 2 or m < 2 * pp:
            raise SpecError("layout.schedule", f"dualpipe needs an even number of microbatches of at least "
                            f"2 x pp = {2 * pp}, not {m}")


def _validate_stage_layers(layout: Layout, model: ModelShape) -> None:
    """`stage_layers`: one count per model chunk (pp, or pp x the chunks per rank), each >= 1, adding up to the
    model's layers; an encoder-decoder model's split must fall between its encoder and its decoder."""
    counts = layout.stage_layers
    if counts is None:
        return
    chunks = layout.shape.pieces
    if len(counts) != chunks:
        raise SpecError("layout.stage_layers", f"must list one layer count per model chunk ({chunks}: pp"
                        + (" x the chunks per rank" if chunks > layout.pp else "") + f"), not {len(counts)}")
    if min(counts) < 1:
        raise SpecError("layout.stage_layers", "every model chunk must hold at least one layer")
    if sum(counts) != model.num_layers:
        raise SpecError("layout.stage_layers", f"must add up to the model's layers ({model.num_layers}), "
                        f"not {sum(counts)}")
    if model.encoder_decoder and layout.pp > 1:
        bounds = [sum(counts[:i + 1]) for i in range(len(counts))]
        if model.encoder_layers not in bounds:
            raise SpecError("layout.stage_layers", f"must end a stage at the last encoder layer "
                            f"({model.encoder_layers}): a stage holds encoder or decoder layers, not both")
        stages = bounds.index(model.encoder_layers) + 1
        if layout.encoder_pipeline_stages is not None and layout.encoder_pipeline_stages != stages:
            raise SpecError("layout.stage_layers", f"puts the encoder on {stages} stages, but "
                            f"encoder_pipeline_stages is {layout.encoder_pipeline_stages}")


def _validate_encoder_decoder(layout: Layout, model: ModelShape) -> None:
    stages = layout.encoder_pipeline_stages
    if not model.encoder_decoder:
        if stages is not None:
            raise SpecError("layout.encoder_pipeline_stages", "applies to encoder_decoder models only")
        return
    if layout.schedule is Schedule.INTERLEAVED_1F1B:
        raise SpecError("layout.schedule", "interleaved_1f1b is not supported for encoder_decoder models "
                        "(Megatron does not interleave them); use 1f1b or gpipe")
    if layout.pp == 1:
        if stages is not None:
            raise SpecError("layout.encoder_pipeline_stages", "needs pp >= 2 (with pp 1 one stage holds both stacks)")
        return
    if layout.pp > model.encoder_layers + model.decoder_layers:
        raise SpecError("layout.pp", f"exceeds encoder_layers + decoder_layers ({model.num_layers})")
    if stages is not None:
        if not 1 <= stages < layout.pp:
            raise SpecError("layout.encoder_pipeline_stages",
                            f"must be between 1 and pp - 1 ({layout.pp - 1}): both stacks need a stage")
        if stages > model.encoder_layers:
            raise SpecError("layout.encoder_pipeline_stages",
                            f"exceeds encoder_layers ({model.encoder_layers}): every stage needs a layer")
        if layout.pp - stages > model.decoder_layers:
            raise SpecError("layout.encoder_pipeline_stages",
                            f"leaves pp - {stages} = {layout.pp - stages} decoder stages for "
                            f"{model.decoder_layers} decoder layers: every stage needs a layer")
