"""The kernels of a mixture-of-experts layer and of multi-head latent attention, and the expert-parallel
all-to-all as a flow pattern over the real paths of the cluster.

A MoE layer runs as Megatron-Core runs it (megatron/core/transformer/moe/: router.py, token_dispatcher.py's
MoEAlltoAllTokenDispatcher, experts.py's TEGroupedMLP), per microbatch on one rank holding T tokens (b·s/tp:
the MoE block works on the sequence-parallel shard):
1. the router: a T x h x E GEMM, then the fused softmax/top-k and the load-balancing loss's kernels (reading the
   T x E fp32 scores);
2. dispatch preprocess: the tokens each expert gets are counted, gathered over the tensor- and expert-parallel
   ranks, and copied to the host (a device-to-host synchronisation: the grouped GEMM needs the split sizes on
   the host, so the host can no longer run ahead of the GPU within the layer);
3. permute (the fused permutation reads T x h and writes the T·k routed copies), the dispatch all-to-alls over
   the EP group (the copies' hidden states, then their fp32 routing probabilities), and, with more than one local
   expert, the sort of the received chunks by local expert;
4. the experts: one grouped GEMM over the local experts for fc1, the activation, one for fc2 (moe_grouped_gemm:
   TEGroupedMLP runs Transformer Engine's GroupedLinear, one call for all local experts, its FP8 casts in one
   multi-tensor kernel of that call); inside it Transformer Engine runs one cuBLAS GEMM per expert over four
   streams (simcore/cost/compute/gemm_shape.py's stream_ramps), and with FP8 pads each expert's rows to the FP8 GEMM's
   alignment and unpads fc2's output (Fp8Padding / Fp8Unpadding); its backward is two grouped GEMMs (input and
   weight gradients);
5. the unsort, the combine all-to-all and the unpermute (a weighted scatter-add back to T x h);
6. the shared experts: a dense MLP of num_shared_experts x moe_ffn_hidden_size on the T tokens.
Backward runs the same kernels' backward (two GEMMs per product) and the two all-to-alls again.

Balanced routing (the published runs force it) sends T·k token copies from each rank and receives as many; the
busiest rank receives `load_imbalance` times that (capped by a capacity factor). A rank sends (ep-1)/ep of its
copies over the network, the rest to itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.interference import comm_load
from simcore.cost.comm.patterns import COLLECTIVE_KEPT_LINKS, FlowPattern, keep_links
from simcore.cost.parameters import COLLECTIVE_LAUNCH_S, COLLECTIVE_STEP_OVERHEAD_S
from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape
from simcore.domain.moe import MoeShape, expert_groups
from simcore.domain.placement import Placement

BYTES = 2
ROUTER_SCORE_BYTES = 4  # the router's scores and probabilities in fp32 (Megatron-Core's moe_router_dtype fp32)
# Device-to-host copy of the tokens-per-expert counts and the stream synchronisation it waits for: one PCIe round
# trip and the driver's synchronisation, about 10-20 us (cudaMemcpyAsync D2H of a few bytes plus
# cudaStreamSynchronize); the host then issues the rest of the layer's kernels while the GPU waits on each.
HOST_SYNC_S = 15e-6
# The MoE block's kernels (simcore/cost/compute/moe_kernels.py), which its Python path issues one by one.
MOE_BLOCK = ("router", "router_topk", "router_aux_loss", "permute", "sort_chunks", "expert_fp8_pad", "expert_fc1",
             "expert_activation", "expert_fc2", "expert_fp8_unpad", "unsort_chunks", "unpermute", "shared_fc1",
             "shared_activation", "shared_fc2")
# Host time to issue one kernel of the MoE block (Megatron-Core's router, token dispatcher and TE GroupedLinear run
# in eager Python: routing-map bookkeeping, autograd functions), one per framework call: a grouped GEMM and its
# fused FP8 quantization are one call (its cuBLAS launches, one an expert, are kernel_time.issue_s's). Fitted
# (bench/fit_moe.py) on the two Megatron-Bridge 25.11 H100 MoE rows within 5-25 us, what issuing one eager
# PyTorch op costs (simcore/cost/parameters.py's HOST_DISPATCH_S source); neither row's layer is host-bound with
# grouped GEMMs, so the fit takes the bound's low end.
MOE_HOST_KERNEL_S = 5e-6


@dataclass(frozen=True, slots=True)
class ExpertLoad:
    """Token copies one rank handles in a MoE layer, per microbatch (the busiest rank)."""

    tokens: float  # T: the rank's own tokens (its sequence-parallel shard)
    sent: float  # T·k copies it dispatches (and receives back combined)
    received: float  # copies its experts compute: T·k·expert_tp x the load imbalance (or the padded capacity)
    per_expert: float  # received over its local experts
    local_experts: int


def expert_load(model: ModelShape, moe: MoeShape, b: int, t: int, ep: int, expert_tp: int) -> ExpertLoad:
    """Dropless, a rank sends its T·k copies and its experts compute the copies routed to them (the busiest rank
    load_imbalance times the mean). With a capacity factor the buffers are dropped and padded to each expert's
    capacity, cf·T·k/E copies (Megatron-Core's drop-and-pad: static sizes), sent and computed whatever the routing."""
    tokens = b * model.seq_length / t
    if moe.capacity_factor is not None:
        sent = tokens * moe.top_k * moe.capacity_factor
        received = sent * expert_tp
    else:
        sent = tokens * moe.top_k
        received = sent * expert_tp * moe.load_imbalance
    local = moe.num_experts // ep
    return ExpertLoad(tokens, sent, received, received / local, local)


def dispatch_bytes(model: ModelShape, load: ExpertLoad) -> float:
    """The buffer one all-to-all of a rank carries (its routed copies' hidden states), bytes."""
    return load.sent * model.hidden_size * BYTES


def probability_bytes(load: ExpertLoad) -> float:
    """The routing probabilities of a rank's routed copies, which its dispatch sends beside their hidden states
    (fp32), bytes."""
    return load.sent * ROUTER_SCORE_BYTES


def a2a_bytes_sent(model: ModelShape, load: ExpertLoad, ep: int) -> float:
    """Bytes a rank sends to other ranks in one all-to-all: (ep-1)/ep of its buffer (balanced routing)."""
    return dispatch_bytes(model, load) * (ep - 1) / ep


def all_to_all_pattern(collectives: CollectiveModel, groups: Sequence[Sequence[int]],
                       own_flows: bool = False) -> FlowPattern:
    """An all-to-all run at once by every group in `groups` (the first is the simulated one): each member sends
    1/n of its buffer to every other member over the routed path (NCCL's all-to-all is one send and one receive
    per peer, all in flight together). One unit of progress is one byte of a member's buffer. It keeps the first
    member's node links and the most loaded others, as a collective's phase does. `own_flows`: only the sends and
    receives of each group's first member (2n routes a group instead of n^2, for groups of thousands): with the
    groups' first members on one node, as qgZ's are, that node's links carry all they carry in the whole
    exchange; the load the other members add to the fabric beyond it is left out."""
    n = len(groups[0])
    loads: dict[int, float] = {}
    hop_latency = 0.0
    router = collectives.router
    pairs: Iterable[tuple[int, int]]
    if own_flows:
        pairs = [(g[0], d) for g in groups for d in g] + [(s, g[0]) for g in groups for s in g]
    else:
        pairs = ((src, dst) for group in groups for src in group for dst in group)
    for src, dst in pairs:
        if src == dst:
            continue
        for link in router.route(src, dst):
            loads[link] = loads.get(link, 0.0) + 1.0 / n
        hop_latency = max(hop_latency, router.latency(src, dst))
    links = tuple(sorted(loads))
    pattern = FlowPattern(links, tuple(loads[link] for link in links),
                          COLLECTIVE_LAUNCH_S + hop_latency + (n - 1) * COLLECTIVE_STEP_OVERHEAD_S)
    node_links = set(router.route(groups[0][0], groups[0][1])) if n > 1 else set()
    return keep_links(pattern, node_links, collectives.capacity, COLLECTIVE_KEPT_LINKS)


def all_to_all_time(collectives: CollectiveModel, groups: Sequence[Sequence[int]], size_bytes: float) -> float:
    """Seconds for an all-to-all of `size_bytes` per member when nothing else uses its links; its bandwidth scaled
    by the user's alltoall table of the group's scope, where there is one
    (simcore/cost/comm/measured_collectives.py)."""
    if len(groups[0]) < 2 or size_bytes <= 0:
        return 0.0
    pattern = all_to_all_pattern(collectives, groups)
    factor = 1.0
    measured = collectives.measured
    if measured is not None and measured.covers("alltoall"):
        def model_time(_kind: str, reference: tuple[int, ...], size: float) -> float:
            alone = all_to_all_pattern(collectives, [reference])
            return alone.latency_s + size / alone.isolated_rate(collectives.capacity)

        factor = measured.transfer_factor("alltoall", groups[0], model_time)
    return pattern.latency_s + factor * size_bytes / pattern.isolated_rate(collectives.capacity)


def grouped_gemm_tokens(per_expert: float) -> int:
    """Rows of one expert's GEMM: its token copies, whole (at least one when it has any)."""
    return max(1, math.ceil(per_expert)) if per_expert > 0 else 0


@dataclass(frozen=True, slots=True)
class ExpertComm:
    """One MoE layer's expert-parallel communication on one rank, per microbatch: seconds and bytes it sends
    (dispatch and combine; with expert_tp > 1 also the all-gather and reduce-scatter over the expert-TP group)."""

    forward_s: float = 0.0
    backward_s: float = 0.0
    bytes_forward: float = 0.0
    bytes_backward: float = 0.0
    # What one all-to-all in flight takes from its GPU (simcore/cost/comm/interference.py): its channels' SMs and the
    # HBM bytes/s it moves (it reads what it sends and writes what it receives, as an all-gather's ring bytes).
    sms: float = 0.0
    hbm_bytes_per_s: float = 0.0


def stage_expert_groups(layout: Layout, placement: Placement, pp_rank: int) -> tuple[list[tuple[int, ...]],
                                                                                     list[tuple[int, ...]]]:
    """The expert-parallel groups and the expert-tensor-parallel groups of pipeline rank `pp_rank`, as GPUs (the
    first of each holds the stage's rank 0)."""
    ranks = layout.tp * layout.dp_cp  # Megatron's dense order tp-cp-dp over the stage, regrouped tp-ep-dp

    def gpu(index: int) -> int:
        dense, tp_rank = divmod(index, layout.tp)
        dp_rank, cp_rank = divmod(dense, layout.cp)
        return placement.gpu(dp_rank, tp_rank, pp_rank, cp_rank)

    ep_groups = [tuple(gpu(i) for i in group) for group in expert_groups(layout.ep, layout.expert_tp, ranks)]
    etp_groups = [tuple(gpu(i) for i in group)
                  for group in expert_groups(layout.expert_tp, 1, ranks)] if layout.expert_tp > 1 else []
    return ep_groups, etp_groups


def expert_comm(model: ModelShape, layout: Layout, placement: Placement | None,
                collectives: CollectiveModel | None, pp_rank: int, free: bool, sm_share: float = 0.0) -> ExpertComm:
    """A MoE layer's all-to-alls on pipeline rank `pp_rank`: every EP group of the stage runs its dispatch at
    once, so the flows of all of them share the links (NVLink inside a node, each GPU's NIC across nodes). Forward
    dispatches and combines; backward sends the gradients of both back the same way. `sm_share`: the share of
    an SM each channel takes from compute beside it (the load it reports)."""
    moe = model.moe
    assert moe is not None
    load = expert_load(model, moe, layout.microbatch_size, layout.tp, layout.ep, layout.expert_tp)
    size = dispatch_bytes(model, load)
    sent = 2 * a2a_bytes_sent(model, load, layout.ep) + probability_bytes(load) * (layout.ep - 1) / layout.ep
    etp = layout.expert_tp
    if etp > 1:  # the received copies are all-gathered over expert TP, and reduce-scattered before the combine
        gathered = size * etp * (1.0 if moe.capacity_factor is not None else moe.load_imbalance)
        sent += 2 * gathered * (etp - 1) / etp
    if free or placement is None or collectives is None:
        return ExpertComm(0.0, 0.0, sent, sent)
    ep_groups, etp_groups = stage_expert_groups(layout, placement, pp_rank)
    # the busiest rank receives load_imbalance times a balanced rank's copies: the all-to-all lasts until it has
    busiest = 1.0 if moe.capacity_factor is not None else moe.load_imbalance
    one = all_to_all_time(collectives, ep_groups, size * busiest)
    # the dispatch sends the copies' routing probabilities in an all-to-all of their own (token_dispatcher.py's
    # token_dispatch: global_probs = all_to_all(...)), and backward returns their gradient the same way
    seconds = 2 * one + all_to_all_time(collectives, ep_groups, probability_bytes(load) * busiest)
    in_flight = comm_load(Collective.ALL_GATHER, layout.ep, size * busiest, one,
                          collectives.communicator(ep_groups[0]).channels, sm_share)
    if etp_groups:
        seconds += (collectives.isolated_time(Collective.ALL_GATHER, etp_groups, gathered)
                    + collectives.isolated_time(Collective.REDUCE_SCATTER, etp_groups, gathered))
    if one <= 0 or sm_share <= 0:  # no all-to-all (ep 1), or interference off (as the engine's: comm_sm_share 0)
        return ExpertComm(seconds, seconds, sent, sent)
    return ExpertComm(seconds, seconds, sent, sent, in_flight.sms, in_flight.hbm_bytes_per_s)


def expert_reduce_ratio(layout: Layout) -> float:
    """Bytes a rank sends reducing an expert gradient over the expert data-parallel group, per byte it sends
    reducing a dense one over dp x cp (ring factors (n-1)/n); 1 when the groups are equal."""
    dp, edp = layout.dp_cp, layout.expert_dp
    if edp == dp:
        return 1.0
    return ((edp - 1) / edp) / ((dp - 1) / dp) if dp > 1 else 0.0


def mla_attention_activation_elements(model: ModelShape) -> float:
    """Per token, the 16-bit attention tensors a layer keeps for backward (2 bytes each, summed over heads): Q, K,
    V and the attention output, as kernels.py's dense count 2(2ad + 2gd); with MLA the query and key heads have
    nope + rope dims, the value heads v_head_dim, and the two latents (and the rotary key) are kept too."""
    a, d = model.num_attention_heads, model.head_dim
    if model.mla is None:
        return 2.0 * (2 * a * d + 2 * model.num_kv_heads * d)
    m = model.mla
    qk = d + m.qk_rope_head_dim
    return 2.0 * (2 * a * qk + 2 * a * m.v_head_dim + m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)


def moe_activation_bytes(model: ModelShape, b: int, t: int, expert_tp: int) -> float:
    """Bytes a MoE block keeps for backward per microbatch on its busiest rank: the router's fp32
    probabilities, the received copies' hidden states (fc1's input), fc1's output and the activation's output
    (the experts' width split over expert_tp), and the shared experts' MLP tensors."""
    moe = model.moe
    assert moe is not None
    load = expert_load(model, moe, b, t, 1, expert_tp)
    up = 2 if model.gated_mlp else 1
    f = moe.ffn_hidden_size / expert_tp
    routed = load.received * BYTES * (model.hidden_size + up * f + f)
    shared_f = moe.num_shared_experts * moe.ffn_hidden_size / t
    shared = b * model.seq_length * BYTES * (up * shared_f + shared_f)
    return load.tokens * moe.num_experts * ROUTER_SCORE_BYTES + routed + shared
