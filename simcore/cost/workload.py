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

from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcore.cost.bf16_layers import bf16_layout, bf16_weight_elements, layer_counts, mark_bf16_layers
from simcore.cost.chunk import ChunkCost, Workload
from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.grad_buckets import with_gradient_buckets
from simcore.cost.comm.groups import tensor_parallel_groups
from simcore.cost.comm.interference import comm_load, slowdown
from simcore.cost.comm.tp_time import collective_s, tp_collectives_s, tp_ring_bytes
from simcore.cost.compute.flash2 import attention_as_run
from simcore.cost.compute.fp8 import WEIGHT_QUANTIZE_BYTES, fp8_gemm_weights
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import (
    ATTENTION_CORE,
    BYTES,
    PROJECTIONS,
    Op,
    embedding_forward_ops,
    logits_forward_ops,
)
from simcore.cost.compute.lora import frozen_ops, lora_chunks, trained
from simcore.cost.compute.moe_kernels import backward_ops, dispatch_split, sequence_time, transformer_layer_ops
from simcore.cost.compute.optimizer import OPTIMIZER_BYTES_PER_PARAMETER, optimizer_step_s
from simcore.cost.compute.weight_cache import weight_recasts
from simcore.cost.compute.weight_gradients import weight_share
from simcore.cost.context_parallel import AttentionRing, attention_ring, local_model, pass_plans, split_at_attention
from simcore.cost.moe import ExpertComm, expert_comm, expert_reduce_ratio
from simcore.cost.mtp import NO_MTP, mtp_cost
from simcore.cost.parameters import FITTED, CostParameters
from simcore.cost.partition import layer_partition
from simcore.cost.tp_async import column_weight_gradients, hidden_backward_s
from simcore.domain.hybrid_shard import shard_ranks
from simcore.domain.layout import Layout, Precision, Recompute
from simcore.domain.model import LayerType, ModelShape
from simcore.domain.placement import Placement
from topology.hardware import GpuSpec

__all__ = ["ATTENTION_CORE", "OPTIMIZER_BYTES_PER_PARAMETER", "ChunkCost", "LayerCost", "LayerKernels", "Workload",
           "build_workload", "layer_cost", "layer_kernels", "layer_partition", "weight_share"]


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer of a type, per microbatch: compute, exposed and hidden tensor-parallel time, bytes, weights."""

    forward: float
    backward: float
    backward_weight: float  # of `backward`, the weight-gradient GEMMs (W)
    core: float  # the attention core's forward (what selective recomputation repeats)
    gemm_fraction: float  # of its compute time, the share in GEMMs and attention (compute-bound)
    tp_forward: float  # exposed tensor-parallel time
    tp_backward: float
    tp_hidden_forward: float
    tp_hidden_backward: float
    tp_bytes_forward: float
    tp_bytes_backward: float
    parameters: int  # per tensor rank
    ep: ExpertComm = ExpertComm()  # a MoE layer's all-to-alls
    expert_parameters: int = 0  # of `parameters`: the experts this rank holds
    # MoE: forward, backward share before the dispatch; of each side's backward, the weight gradients' share
    dispatch_split: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    ep_slowdown: float = 1.0  # MoE: its compute's slowdown beside one of its all-to-alls

    def moe(self, attr: str, side: int) -> float:
        """A MoE layer's forward or backward kernels, or its backward's weight gradients (`attr` "forward",
        "backward", "weight"), before its dispatch (`side` 0) or after (1)."""
        forward, backward, *weight = self.dispatch_split
        share = forward if attr == "forward" else backward
        seconds = (self.forward if attr == "forward" else self.backward) * (share if side == 0 else 1.0 - share)
        return seconds * weight[side] if attr == "weight" else seconds

    def recompute(self, mode: Recompute) -> float:
        if mode is Recompute.FULL:
            return self.forward + self.tp_forward + self.ep.forward_s
        return self.core if mode is Recompute.SELECTIVE else 0.0


@dataclass(frozen=True, slots=True)
class LayerKernels:
    """One layer of a type, per microbatch, on one tensor rank: its kernels' times (the same on every rank)."""

    forward: float
    backward: float
    backward_weight: float  # of `backward`, the projections' weight-gradient GEMMs (W)
    core: float  # the attention core's forward
    gemm_forward: float  # the projections, which tp_comm_overlap hides collectives under
    gemm_backward: float
    ring: AttentionRing | None = None  # context parallelism: the attention core's ring (its time is in the above)
    pre: tuple[float, float] = (0.0, 0.0)  # with a ring: (forward, backward) s of the kernels before the core
    post: tuple[float, float] = (0.0, 0.0)  # and after it
    column_wgrad: tuple[tuple[str, float], ...] = ()  # with async TP collectives (simcore/cost/tp_async.py)


def layer_kernels(model: ModelShape, layer: LayerType, layout: Layout, gpu: GpuSpec,
                  params: CostParameters) -> LayerKernels:
    """`model` is the one a rank runs (s/cp tokens a sample with context parallelism, whose attention core is
    the ring's, costed on the whole sequence by simcore/cost/context_parallel.py). MLA's attention and the MoE
    block replace the dense ones where the model has them (simcore/cost/compute/moe_kernels.py)."""
    ops = transformer_layer_ops(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, layer,
                                layout.fp8, layout.ep, layout.expert_tp, layout.eager)
    ops = attention_as_run(ops, layout)
    recast_fwd, recast_bwd = weight_recasts(ops, layout)  # FP8 weights made every microbatch (weight_cache.py)
    gemm_forward = ops_time(tuple(op for op in ops if op.name in PROJECTIONS), gpu, params)
    gemm_backward = ops_time(tuple(op.backward() for op in ops if op.name in PROJECTIONS), gpu, params)
    backward = ops_time(backward_ops(ops) + recast_bwd, gpu, params)
    # The weight-gradient GEMMs run outside the attention core: the same with or without a ring.
    backward_weight = weight_share(backward_ops(ops), gpu, params) * backward
    column = column_weight_gradients(ops, gpu, params) if layout.async_tensor_model_parallel_allreduce else ()
    if layout.cp == 1:
        return LayerKernels(
            forward=sequence_time(ops + recast_fwd, gpu, params), backward=backward, backward_weight=backward_weight,
            core=ops_time(tuple(op for op in ops if op.name in ATTENTION_CORE), gpu, params),
            gemm_forward=gemm_forward, gemm_backward=gemm_backward, column_wgrad=column)
    whole = replace(layer, seq=layer.seq * layout.cp)
    ring = attention_ring(replace(model, seq_length=whole.seq), whole, layout, gpu, params)
    before, after = split_at_attention(ops)
    pre = (sequence_time(before + recast_fwd, gpu, params), ops_time(backward_ops(before) + recast_bwd, gpu, params))
    post = (sequence_time(after, gpu, params), ops_time(backward_ops(after), gpu, params))
    return LayerKernels(forward=pre[0] + ring.forward_s + post[0], backward=pre[1] + ring.backward_s + post[1],
                    backward_weight=backward_weight, core=ring.forward_s, gemm_forward=gemm_forward,
                    gemm_backward=gemm_backward, ring=ring, pre=pre, post=post, column_wgrad=column)


def layer_cost(model: ModelShape, layer: LayerType, layout: Layout, kernels: LayerKernels,
                collectives: CollectiveModel | None, groups: Sequence[tuple[int, ...]], free: bool,
                gpu: GpuSpec, params: CostParameters) -> LayerCost:
    """The layer's kernels plus its tensor-parallel collectives on one rank's groups."""
    b, t, sp = layout.microbatch_size, layout.tp, layout.sequence_parallel
    message = b * layer.seq * model.hidden_size * BYTES  # one microbatch's hidden states
    one_tp = 0.0 if free else tp_collectives_s(collectives, groups, message, sp)
    # Two collectives per layer per direction (Megatron's f and g operators around attention and the MLP), three
    # with cross-attention.
    blocks = 3 if layer.cross_seq else 2
    tp_fwd = tp_bwd = blocks * one_tp
    bytes_fwd = bytes_bwd = blocks * tp_ring_bytes(t, message)
    encoder_dgrad = 0.0
    if layer.cross_seq:
        # The encoder output enters the column-parallel key/value projection: its gradient is all-reduced over
        # the tensor ranks in backward (with sequence parallelism it is all-gathered in forward and
        # reduce-scattered in backward).
        encoder_out = b * layer.cross_seq * model.hidden_size * BYTES
        if not free:
            if sp:
                tp_fwd += collective_s(collectives, Collective.ALL_GATHER, groups, encoder_out)
            encoder_dgrad = collective_s(collectives, Collective.REDUCE_SCATTER if sp else Collective.ALL_REDUCE,
                                         groups, encoder_out)
            tp_bwd += encoder_dgrad
        half = tp_ring_bytes(t, encoder_out) / 2
        bytes_fwd += half if sp else 0.0
        bytes_bwd += half if sp else 2 * half
    # With tp_comm_overlap the collectives run in chunks under the GEMMs that feed or consume them
    # (Megatron-Core's userbuffers): only what the GEMMs cannot cover stays on the critical path.
    exposed_fwd = max(0.0, tp_fwd - kernels.gemm_forward) if layout.tp_comm_overlap else tp_fwd
    exposed_bwd = max(0.0, tp_bwd - kernels.gemm_backward) if layout.tp_comm_overlap else tp_bwd
    if kernels.column_wgrad and not layout.tp_comm_overlap and not free and one_tp > 0:
        dgrad = collective_s(collectives, Collective.REDUCE_SCATTER, groups, message) if sp else one_tp
        exposed_bwd -= hidden_backward_s(kernels.column_wgrad, dgrad, encoder_dgrad)
    # The GEMMs that hide them run slower while the collectives' channels hold SMs (simcore/cost/comm/interference.py):
    # a GEMM beside T seconds of communication takes T x (s - 1) / s longer, s the slowdown.
    slowed = 0.0
    if layout.tp_comm_overlap and not free and params.comm_sm_share > 0 and one_tp > 0:
        assert collectives is not None
        kind = Collective.ALL_GATHER if sp else Collective.ALL_REDUCE
        load = comm_load(kind, t, message, one_tp, collectives.communicator(groups[0]).channels,
                         params.comm_sm_share)
        s = slowdown(load.sms, load.hbm_bytes_per_s, gpu.sm_count, gpu.hbm_bandwidth_bytes_per_s, 1.0)
        slowed = (s - 1) / s
    return LayerCost(
        forward=kernels.forward + slowed * (tp_fwd - exposed_fwd),
        backward=kernels.backward + slowed * (tp_bwd - exposed_bwd), backward_weight=kernels.backward_weight,
        core=kernels.core,
        gemm_fraction=min(1.0, (kernels.gemm_forward + kernels.core) / kernels.forward) if kernels.forward else 1.0,
        tp_forward=exposed_fwd, tp_backward=exposed_bwd,
        tp_hidden_forward=tp_fwd - exposed_fwd, tp_hidden_backward=tp_bwd - exposed_bwd,
        tp_bytes_forward=bytes_fwd, tp_bytes_backward=bytes_bwd,
        parameters=model.parameters_per_layer(layer) // t)


def _moe_layer_cost(cost: LayerCost, model: ModelShape, layer: LayerType, layout: Layout, comm: ExpertComm,
                    split: tuple[float, float, float, float], gpu: GpuSpec) -> LayerCost:
    """A MoE layer: the dense part's weights split over tp, the experts' over ep x expert_tp, its all-to-alls,
    where they cut its kernels, and how much slower its compute runs beside one of them."""
    experts = model.expert_parameters() // (layout.ep * layout.expert_tp)
    dense = (model.parameters_per_layer(layer) - model.expert_parameters()) // layout.tp
    return replace(cost, parameters=dense + experts, expert_parameters=experts, ep=comm, dispatch_split=split,
                   ep_slowdown=slowdown(comm.sms, comm.hbm_bytes_per_s, gpu.sm_count,
                                        gpu.hbm_bandwidth_bytes_per_s, cost.gemm_fraction))


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
    logit_ops = (frozen_ops if model.lora else tuple)(logits_forward_ops(model, b, t, sp))  # LoRA: frozen
    emb_fwd, dec_emb_fwd = ops_time(emb_ops, gpu, params), ops_time(dec_emb_ops, gpu, params)
    emb_bwd, dec_emb_bwd = (ops_time(_bwd(trained(ops, model)), gpu, params) for ops in (emb_ops, dec_emb_ops))
    logit_fwd, logit_bwd = ops_time(logit_ops, gpu, params), ops_time(_bwd(logit_ops), gpu, params)
    logit_weight = weight_share(_bwd(logit_ops), gpu, params) * logit_bwd

    def tp_groups(rank: int) -> Sequence[tuple[int, ...]]:
        # Free communication needs no groups (nor a placement or a network: memory planning costs layouts so).
        if free or placement is None:
            return []
        return tensor_parallel_groups(placement, rank, range(layout.dp))

    layers_of, encoder_stages = layer_partition(model, layout, gpu, params)
    layers_of = mark_bf16_layers(layers_of, *layout.bf16_layers, model.mtp_layers)  # with a low precision only
    types = dict.fromkeys([*(layer for layer, _ in model.layer_stacks()), *(x for r in layers_of for x, _ in r)])
    sixteen = bf16_layout(layout)  # what the BF16 layers run with (simcore/cost/bf16_layers.py)
    run_with = {layer: sixteen if layer.bf16 else layout for layer in types}
    # Kernel times once per layer type; tensor-parallel time per rank, on its real groups (cached by the model).
    kernels = {layer: layer_kernels(model, layer, run_with[layer], gpu, params) for layer in types}
    rank_costs = [{layer: layer_cost(model, layer, layout, k, collectives, tp_groups(r), free, gpu, params)
                   for layer, k in kernels.items()} for r in range(p)]
    splits = {layer: dispatch_split(attention_as_run(transformer_layer_ops(
        model, b, t, sp, layer, run_with[layer].fp8, layout.ep, layout.expert_tp, layout.eager), run_with[layer]),
        gpu, params) for layer in kernels if layer.moe}
    for r, costs in enumerate(rank_costs):
        for layer in costs:
            if layer.moe:
                comm = expert_comm(model, layout, placement, collectives, r, free, params.comm_sm_share)
                costs[layer] = _moe_layer_cost(costs[layer], model, layer, layout, comm, splits[layer], gpu)
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
                emb_bytes += tp_ring_bytes(t, size)
                if not free:
                    emb_tp += collective_s(collectives, Collective.REDUCE_SCATTER, groups, size) if sp else \
                        tp_collectives_s(collectives, groups, size, False)
        if last and sp and not free:
            logit_tp = collective_s(collectives, Collective.ALL_GATHER, groups, out_message)
        # the last stage also runs the multi-token prediction depths: their layers are in `runs`, the rest here
        mtp = mtp_cost(model, b, t, sp, gpu, params, collectives, groups) if last else NO_MTP

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
                   + (vocab_params if output_layer else 0) + mtp.parameters)
        forward_compute_s = total("forward") + embed_fwd + (logit_fwd if last else 0.0) + mtp.forward_s
        forward_tp_s = total("tp_forward") + emb_tp + logit_tp + mtp.forward_tp_s
        backward_compute_s = total("backward") + embed_bwd + (logit_bwd if last else 0.0) + mtp.backward_s
        backward_tp_s = total("tp_backward") + logit_tp + mtp.backward_tp_s
        recompute_s = sum(n * costs[layer].recompute(mode) for layer, n in runs)
        cp_forward = cp_backward = None
        ring_kernels = kernels[first_layer]
        forward_ep_s = sum(n * costs[layer].ep.forward_s for layer, n in runs)
        backward_ep_s = sum(n * costs[layer].ep.backward_s for layer, n in runs)
        if ring_kernels.ring is not None:  # context parallelism: one kind of layer (no encoder-decoder)
            # (a MoE layer's all-to-alls run after its attention: with its exposed TP time in `post`; a model's
            # first dense layers cost as its first layer's kind, the chunk's totals keeping the difference)
            one = costs[first_layer]
            cp_forward, cp_backward = pass_plans(
                ring_kernels.ring, ring_kernels.pre,
                (ring_kernels.post[0] + one.tp_forward + one.ep.forward_s,
                 ring_kernels.post[1] + one.tp_backward + one.ep.backward_s), mode,
                sum(n for _, n in runs), forward_compute_s + forward_tp_s + forward_ep_s,
                recompute_s + backward_compute_s + backward_tp_s + backward_ep_s)
        chunks.append(ChunkCost(
            virtual_stage=vs, rank=rank, chunk=chunk, layers=sum(n for _, n in runs),
            layer_counts=layer_counts(runs),
            has_embedding=first or decoder_embeds, embeds_target=decoder_embeds, has_logits=last,
            forward_compute_s=forward_compute_s, forward_tp_s=forward_tp_s,
            backward_compute_s=backward_compute_s, backward_tp_s=backward_tp_s, recompute_s=recompute_s,
            # The embedding's backward only accumulates its table's gradient: weight work.
            backward_weight_s=(total("backward_weight") + embed_bwd + (logit_weight if last else 0.0)
                               + mtp.backward_weight_s),
            recompute_tp_s=total("tp_forward") if full else 0.0,
            tp_hidden_forward_s=total("tp_hidden_forward"),
            tp_hidden_backward_s=total("tp_hidden_backward") + (total("tp_hidden_forward") if full else 0.0),
            parameters=weights,
            # scatter/gather over tensor ranks (or sequence-parallel shards)
            input_bytes=b * input_tokens * h * BYTES / t if not first else 0.0,
            tp_bytes_forward=total("tp_bytes_forward") + emb_bytes + mtp.tp_bytes,
            tp_bytes_backward=total("tp_bytes_backward") + (total("tp_bytes_forward") if full else 0.0),
            cp_forward=cp_forward, cp_backward=cp_backward,
            tp_message_bytes=b * first_layer.seq * h * BYTES,
            gemm_fraction=sum(n * costs[layer].forward * costs[layer].gemm_fraction for layer, n in runs)
            / max(total("forward"), 1e-30),
            forward_ep_s=forward_ep_s, backward_ep_s=backward_ep_s,
            recompute_ep_s=sum(n * costs[layer].ep.forward_s for layer, n in runs) if full else 0.0,
            ep_bytes_forward=sum(n * costs[layer].ep.bytes_forward for layer, n in runs),
            ep_bytes_backward=sum(n * costs[layer].ep.bytes_backward * (2 if full else 1) for layer, n in runs),
            expert_parameters=sum(n * costs[layer].expert_parameters for layer, n in runs),
            fp8_parameters=(fp8_gemm_weights(model, [(layer.kind, n) for layer, n in runs if not layer.bf16], t)
                            if layout.fp8 is not None else 0.0),
            bf16_gemm_weights=bf16_weight_elements(model, runs, t) if layout.fp8 is not None else 0.0,
            expert_reduce_ratio=expert_reduce_ratio(layout),
            moe_layers=sum(n for layer, n in runs if layer.moe),
            moe_forward_s=(sum(n * costs[layer].moe("forward", 0) for layer, n in runs if layer.moe),
                           sum(n * costs[layer].moe("forward", 1) for layer, n in runs if layer.moe)),
            moe_backward_s=(sum(n * costs[layer].moe("backward", 0) for layer, n in runs if layer.moe),
                            sum(n * costs[layer].moe("backward", 1) for layer, n in runs if layer.moe)),
            moe_weight_s=(sum(n * costs[layer].moe("weight", 0) for layer, n in runs if layer.moe),
                          sum(n * costs[layer].moe("weight", 1) for layer, n in runs if layer.moe)),
            ep_slowdown=max((costs[layer].ep_slowdown for layer, _ in runs), default=1.0),
        ))
        previous = runs[-1][0]
    chunks = with_gradient_buckets(lora_chunks(chunks, model, t), model, layout)  # (grad_buckets.py)
    params_per_rank = [sum(c.reduced_parameters for c in chunks if c.rank == r) for r in range(p)]
    # ZeRO 1: each rank updates 1/(dp*cp) of the dense parameters (HSDP: 1/zero_shard_size) and 1/edp of its experts'
    shards = shard_ranks(layout) if layout.zero_stage >= 1 else 1
    expert_shards = layout.expert_dp if layout.zero_stage >= 1 else 1
    updated = [sum((c.parameters - c.expert_parameters - c.frozen_parameters) / shards
                   + c.expert_parameters / expert_shards for c in chunks if c.rank == r) for r in range(p)]
    fp16 = layout.precision is Precision.FP16
    optimizer = tuple(optimizer_step_s(n, gpu, params, fp16) for n in updated)
    recipe = layout.fp8
    # A frozen base built as FP8 tensors (`fp8_params`) is never quantized again: Transformer Engine takes a weight
    # that is already a QuantizedTensor as it is (TransformerEngine @d0067d0 transformer_engine/pytorch/module/
    # base.py quantize_weight, "Already-quantized weight (primary FP8 parameters)": update_usage only), and the
    # transpose Hopper's dgrad needs is made once and stays valid while the weight does not change (tensor/storage/
    # float8_tensor_storage.py update_usage -> _create_transpose; Blackwell needs none: is_non_tn_fp8_gemm_supported).
    if recipe is not None and not layout.fp8_params and layout.fp8_weight_cache:  # else per microbatch (above)
        # FP8: each rank quantizes its GEMM weights once per iteration (cached over the microbatches).
        counts = [[k for c in chunks if c.rank == r for k in c.layer_counts] for r in range(p)]
        # (not the BF16 layers': they have no FP8 or FP4 copy)
        low = [fp8_gemm_weights(model, counts[r], t) - sum(c.bf16_gemm_weights for c in chunks if c.rank == r)
               for r in range(p)]
        optimizer = tuple(seconds + low[r] * WEIGHT_QUANTIZE_BYTES[recipe]
                          / (gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency)
                          for r, seconds in enumerate(optimizer))
    grads = tuple(float(n * layout.grad_reduce_bytes) if layout.dp_cp > 1 else 0.0 for n in params_per_rank)
    copies = sorted({c.rank for c in chunks if c.has_embedding or (c.has_logits and model.tied_embeddings)})
    if not model.tied_embeddings or len(copies) < 2 or model.lora is not None:
        copies = []
    return Workload(tuple(chunks), optimizer, grads, encoder_stages, tuple(copies),
                    float(vocab_params * layout.grad_reduce_bytes) if copies else 0.0)


def _bwd(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    return tuple(op.backward() for op in ops)
