"""The work of one training iteration, per model chunk: what each pass costs, what it sends, what it holds.

Layers are split over the model chunks in order (virtual stage i = chunk * pp + rank, Megatron's layout; the V
of ZB-V and DualPipe's two copies place them otherwise: simcore/domain/pipeline_shape.py) by simcore/partition.py:
by count (the extra layers to the middle stages first, since the first stage also embeds and the last also
computes the logits) or by cost; an encoder-decoder model's first stages hold the encoder, the rest the decoder.
A chunk receives its first layer's input: a decoder stage also receives the encoder output (the first decoder
stage only that), so messages between decoder stages are larger.
Tensor-parallel collectives are folded into the pass that issues them; their time comes from the collective
model on the real tensor-parallel group and its paths, with the concurrent groups of the other data-parallel
replicas sharing the links.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.collectives import Collective, CollectiveModel
from simcore.cost.context_parallel import (
    CpPass,
    local_model,
    pass_plans,
)
from simcore.cost.fp8 import WEIGHT_QUANTIZE_BYTES, fp8_weight_elements
from simcore.cost.kernels import (
    ATTENTION_CORE,
    BYTES,
    OPTIMIZER_BYTES_PER_PARAMETER,
    embedding_forward_ops,
    logits_forward_ops,
    ops_time,
    optimizer_step_s,
)
from simcore.cost.layer_cost import (
    LayerCost,
    backward_ops,
    layer_cost,
    layer_kernels,
    one_collective,
    tp_bytes,
    tp_time,
)
from simcore.cost.parameters import FITTED, CostParameters
from simcore.cost.partition import Chunks, partition, stage_costs
from simcore.cost.weight_gradients import weight_share
from simcore.domain.layout import Layout, Precision, Recompute
from simcore.domain.model import LayerType, ModelShape
from simcore.domain.placement import Placement
from topology.hardware import GpuSpec

__all__ = ["ATTENTION_CORE", "OPTIMIZER_BYTES_PER_PARAMETER", "ChunkCost", "Workload", "build_workload",
           "layer_partition", "weight_share"]


@dataclass(frozen=True, slots=True)
class ChunkCost:
    """One model chunk on one pipeline rank; times per microbatch, in seconds; sizes per tensor-parallel rank."""

    virtual_stage: int
    rank: int
    chunk: int
    layers: int
    layer_counts: tuple[tuple[str, int], ...]  # its layers by kind ("transformer", or "encoder"/"decoder")
    has_embedding: bool  # it embeds tokens: the first chunk, and the one that starts a decoder
    embeds_target: bool  # it embeds an encoder-decoder model's target tokens
    has_logits: bool
    forward_compute_s: float
    forward_tp_s: float
    backward_compute_s: float
    backward_tp_s: float
    recompute_s: float  # the recomputed forward, its tensor-parallel collectives included
    recompute_tp_s: float
    parameters: int
    input_bytes: float  # the message it receives in forward (and whose gradient it sends back), per tensor rank
    tp_hidden_forward_s: float  # tensor-parallel time overlapped with the GEMMs (tp_comm_overlap), per microbatch
    tp_hidden_backward_s: float  # the same for the backward pass, the recomputed forward included
    tp_bytes_forward: float  # bytes one tensor rank sends in tensor-parallel collectives, per microbatch
    tp_bytes_backward: float  # the same for the backward pass, the recomputed forward included
    # Context parallelism (cp > 1): each pass as its layers' segments (compute, ring steps, exchanges) for the
    # engine to run as events (simcore/cost/context_parallel.py); None without it.
    cp_forward: CpPass | None = None
    cp_backward: CpPass | None = None
    gemm_fraction: float = 1.0  # of its compute time, the share in GEMMs and attention (its layers')
    tp_message_bytes: float = 0.0  # one tensor-parallel all-reduce's buffer: its first layer's hidden states
    # Of backward_compute_s, the weight-gradient GEMMs (W) and the embedding's gradient: what a zero-bubble
    # schedule defers; the rest of the backward pass is B, the input gradient the previous stage waits for.
    backward_weight_s: float = 0.0

    @property
    def forward_s(self) -> float:
        return self.forward_compute_s + self.forward_tp_s

    def slowed(self, factor: float) -> ChunkCost:
        """The chunk on a GPU whose compute takes `factor` times as long (a straggler): its kernels, the
        recomputed forward's included, scale; its tensor-parallel collectives do not (they wait for it, which
        the longer compute before them already is)."""
        recompute_kernels = self.recompute_s - self.recompute_tp_s
        # Context parallelism's passes run their segments: every compute segment scales (the tensor-parallel
        # time folded into them too, an approximation); the ring's sends do not.
        return replace(self, forward_compute_s=self.forward_compute_s * factor,
                       backward_compute_s=self.backward_compute_s * factor,
                       backward_weight_s=self.backward_weight_s * factor,
                       recompute_s=recompute_kernels * factor + self.recompute_tp_s,
                       cp_forward=self.cp_forward.scaled(factor) if self.cp_forward else None,
                       cp_backward=self.cp_backward.scaled(factor) if self.cp_backward else None)

    @property
    def backward_s(self) -> float:
        return self.recompute_s + self.backward_compute_s + self.backward_tp_s

    @property
    def backward_input_s(self) -> float:
        """B: the recomputed forward, the input-gradient GEMMs, the memory-bound backward kernels and the
        backward's tensor-parallel collectives (the input gradient is what they reduce)."""
        return self.recompute_s + (self.backward_compute_s - self.backward_weight_s) + self.backward_tp_s


@dataclass(frozen=True, slots=True)
class Workload:
    chunks: tuple[ChunkCost, ...]  # by virtual stage
    optimizer_s: tuple[float, ...]  # per pipeline rank
    grad_bytes: tuple[float, ...]  # per pipeline rank: gradient bytes each rank reduces over data parallelism
    encoder_stages: int = 0  # pipeline ranks holding the encoder (encoder-decoder models)
    # Tied embeddings under pipelining: the ranks that hold a copy of the shared word embedding (the first stage,
    # a decoder's first stage, the last stage's output layer) all-reduce its gradient after the data-parallel
    # reduction, before the step (Megatron-Core's finalize_model_grads, _allreduce_word_embedding_grads);
    # bytes per tensor rank. Empty when there is no second copy.
    embedding_sync_ranks: tuple[int, ...] = ()
    embedding_sync_bytes: float = 0.0


def layer_partition(model: ModelShape, layout: Layout, gpu: GpuSpec,
                    params: CostParameters = FITTED) -> tuple[Chunks, int]:
    """The layout's layers per virtual stage and its encoder stage count (simcore/partition.py)."""
    costs = stage_costs(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, str(layout.recompute),
                        gpu, params)
    return partition(model, layout.pp, layout.shape.pieces // layout.pp, layout.pipeline_partition, costs,
                     layout.encoder_pipeline_stages, layout.stage_layers)


def build_workload(model: ModelShape, layout: Layout, gpu: GpuSpec, placement: Placement | None,
                   collectives: CollectiveModel | None, free_communication: bool = False,
                   params: CostParameters = FITTED) -> Workload:
    """Cost every chunk of the layout; pure function of its inputs. With `free_communication` the
    tensor-parallel collectives take no time (and `placement` and `collectives` may be None)."""
    b, t, p = layout.microbatch_size, layout.tp, layout.pp
    shape = layout.shape
    sp, free, mode = layout.sequence_parallel, free_communication, layout.recompute
    full = mode is Recompute.FULL
    h = model.hidden_size
    vocab_params = model.vocab_size * h // t
    positions = 0 if model.encoder_decoder else model.seq_length * h // t
    model = local_model(model, layout.cp)  # a context-parallel rank runs s/cp tokens of each sample
    emb_ops = embedding_forward_ops(model, b, t)
    dec_emb_ops = embedding_forward_ops(model, b, t, model.decoder_seq_length) if model.encoder_decoder else emb_ops
    logit_ops = logits_forward_ops(model, b, t, sp)
    emb_fwd, emb_bwd = ops_time(emb_ops, gpu, params), ops_time(backward_ops(emb_ops), gpu, params)
    dec_emb_fwd, dec_emb_bwd = ops_time(dec_emb_ops, gpu, params), ops_time(backward_ops(dec_emb_ops), gpu, params)
    logit_fwd, logit_bwd = ops_time(logit_ops, gpu, params), ops_time(backward_ops(logit_ops), gpu, params)
    logit_weight = weight_share(backward_ops(logit_ops), gpu, params) * logit_bwd

    def tp_groups(rank: int) -> list[tuple[int, ...]]:
        # Free communication needs no groups (nor a placement or a network: memory planning costs layouts so).
        if free or placement is None:
            return []
        return [placement.tp_group(d, rank, c) for c in range(layout.cp) for d in range(layout.dp)]

    # Kernel times once per layer type; tensor-parallel time per rank, on its real groups (cached by the model).
    kernels = {layer: layer_kernels(model, layer, layout, gpu, params) for layer, _ in model.layer_stacks()}
    rank_costs = [{layer: layer_cost(model, layer, layout, k, collectives, tp_groups(r), free, gpu, params)
                   for layer, k in kernels.items()} for r in range(p)]
    layers_of, encoder_stages = layer_partition(model, layout, gpu, params)
    emb_message = b * model.seq_length * h * BYTES
    dec_emb_message = b * model.decoder_seq_length * h * BYTES
    out_message = b * model.output_seq_length * h * BYTES

    chunks = []
    previous: LayerType | None = None
    for vs in range(shape.virtual_stages):
        runs = layers_of[shape.piece(vs)]
        chunk, rank = shape.chunk(vs), shape.rank(vs)
        costs = rank_costs[rank]
        groups = tp_groups(rank)
        first, last = shape.is_first(vs), shape.is_last(vs)
        if first:  # a chain starts (DualPipe's second copy starts a chain of its own)
            previous = None
        first_layer = runs[0][0]
        decoder_embeds = any(layer.cross_seq for layer, _ in runs) and (previous is None or not previous.cross_seq)
        # What the chunk receives (and returns the gradient of): its first layer's input hidden states; a decoder
        # stage after another also receives the encoder output, which every decoder layer reads; the first
        # decoder stage receives only the encoder output (it embeds the target tokens itself).
        if first_layer.cross_seq and previous is not None and not previous.cross_seq:
            input_tokens = first_layer.cross_seq
        else:
            input_tokens = first_layer.seq + first_layer.cross_seq
        # The vocabulary-parallel embedding ends with an all-reduce (a reduce-scatter with sequence parallelism);
        # with sequence parallelism the logits first all-gather the final hidden states (and reduce-scatter their
        # gradient in backward): Korthikanti et al. 2022.
        emb_tp = logit_tp = emb_bytes = 0.0
        for embeds, size in ((first, emb_message), (decoder_embeds, dec_emb_message)):
            if embeds:  # the encoder's (or only) embedding, and the decoder's on the stage that starts it
                emb_bytes += tp_bytes(t, size)
                if not free:
                    emb_tp += one_collective(collectives, Collective.REDUCE_SCATTER, groups, size) if sp else \
                        tp_time(collectives, groups, size, False)
        if last and sp and not free:
            logit_tp = one_collective(collectives, Collective.ALL_GATHER, groups, out_message)

        def total(attr: str, runs: list[tuple[LayerType, int]] = runs,
                  costs: dict[LayerType, LayerCost] = costs) -> float:
            return sum(n * getattr(costs[layer], attr) for layer, n in runs)

        # The first chunk embeds the (encoder's) tokens; the chunk that starts the decoder embeds the target's.
        embed_fwd = (emb_fwd if first else 0.0) + (dec_emb_fwd if decoder_embeds else 0.0)
        embed_bwd = (emb_bwd if first else 0.0) + (dec_emb_bwd if decoder_embeds else 0.0)
        # The last stage holds the output layer: its own matrix when untied, a copy of the embedding when tied and
        # the pipeline has more than one stage (Megatron keeps both copies' gradients in sync). A stage that
        # embeds the decoder's tokens holds a copy of the shared embedding too.
        output_layer = last and (shape.virtual_stages > 1 or not model.tied_embeddings)
        weights = (sum(n * costs[layer].parameters for layer, n in runs)
                   + (vocab_params + positions if first else 0)
                   + (vocab_params if decoder_embeds and not first else 0)
                   + (vocab_params if output_layer else 0))
        forward_compute_s = total("forward") + embed_fwd + (logit_fwd if last else 0.0)
        forward_tp_s = total("tp_forward") + emb_tp + logit_tp
        backward_compute_s = total("backward") + embed_bwd + (logit_bwd if last else 0.0)
        backward_tp_s = total("tp_backward") + logit_tp
        recompute_s = sum(n * costs[layer].recompute(mode) for layer, n in runs)
        cp_forward = cp_backward = None
        ring_kernels = kernels[first_layer]
        if ring_kernels.ring is not None:  # context parallelism: one kind of layer (no encoder-decoder)
            one = costs[first_layer]
            cp_forward, cp_backward = pass_plans(
                ring_kernels.ring, ring_kernels.pre,
                (ring_kernels.post[0] + one.tp_forward, ring_kernels.post[1] + one.tp_backward), mode,
                sum(n for _, n in runs), forward_compute_s + forward_tp_s,
                recompute_s + backward_compute_s + backward_tp_s)
        chunks.append(ChunkCost(
            virtual_stage=vs, rank=rank, chunk=chunk, layers=sum(n for _, n in runs),
            layer_counts=tuple((layer.kind, n) for layer, n in runs),
            has_embedding=first or decoder_embeds, embeds_target=decoder_embeds, has_logits=last,
            forward_compute_s=forward_compute_s, forward_tp_s=forward_tp_s,
            backward_compute_s=backward_compute_s, backward_tp_s=backward_tp_s, recompute_s=recompute_s,
            # The embedding's backward only accumulates its table's gradient: weight work.
            backward_weight_s=total("backward_weight") + embed_bwd + (logit_weight if last else 0.0),
            recompute_tp_s=total("tp_forward") if full else 0.0,
            tp_hidden_forward_s=total("tp_hidden_forward"),
            tp_hidden_backward_s=total("tp_hidden_backward") + (total("tp_hidden_forward") if full else 0.0),
            parameters=weights,
            # scatter/gather over tensor ranks (or sequence-parallel shards)
            input_bytes=b * input_tokens * h * BYTES / t if not first else 0.0,
            tp_bytes_forward=total("tp_bytes_forward") + emb_bytes,
            tp_bytes_backward=total("tp_bytes_backward") + (total("tp_bytes_forward") if full else 0.0),
            cp_forward=cp_forward, cp_backward=cp_backward,
            tp_message_bytes=b * first_layer.seq * h * BYTES,
            gemm_fraction=sum(n * costs[layer].forward * costs[layer].gemm_fraction for layer, n in runs)
            / max(total("forward"), 1e-30),
        ))
        previous = runs[-1][0]
    params_per_rank = [sum(c.parameters for c in chunks if c.rank == r) for r in range(p)]
    shards = layout.dp_cp if layout.zero_stage >= 1 else 1  # ZeRO 1: each rank updates 1/(dp*cp) of them
    fp16 = layout.precision is Precision.FP16
    optimizer = tuple(optimizer_step_s(n / shards, gpu, params, fp16) for n in params_per_rank)
    recipe = layout.fp8
    if recipe is not None:
        # FP8: each rank quantizes its GEMM weights once per iteration (cached over the microbatches).
        optimizer = tuple(seconds + fp8_gemm_weights(model, chunks, r, t) * WEIGHT_QUANTIZE_BYTES[recipe]
                          / (gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency)
                          for r, seconds in enumerate(optimizer))
    grads = tuple(float(n * layout.grad_reduce_bytes) if layout.dp_cp > 1 else 0.0 for n in params_per_rank)
    copies = sorted({c.rank for c in chunks if c.has_embedding or (c.has_logits and model.tied_embeddings)})
    if not model.tied_embeddings or len(copies) < 2:
        copies = []
    return Workload(tuple(chunks), optimizer, grads, encoder_stages, tuple(copies),
                    float(vocab_params * layout.grad_reduce_bytes) if copies else 0.0)


def fp8_gemm_weights(model: ModelShape, chunks: list[ChunkCost] | tuple[ChunkCost, ...], rank: int, t: int) -> float:
    """Weights of pipeline rank `rank`'s FP8 GEMMs, per tensor-parallel rank (its layers' projections)."""
    layers = {layer.kind: layer for layer, _ in model.layer_stacks()}
    return sum(n * fp8_weight_elements(model, layers[kind], t) for c in chunks if c.rank == rank
               for kind, n in c.layer_counts)
