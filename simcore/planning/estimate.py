"""A closed-form iteration time of a layout, only to decide which candidates a bounded search simulates first.
It never ranks: every ranked figure comes from the simulator (simcore.planning.rank).

Built on the cost model, with no formula of its own for what the cost model already computes: the compute of
each layer type, the embedding and the logits per microbatch are `simcore.cost.partition.stage_costs` (the
kernels' roofline times, forward + backward + recomputation), the layers of each stage are
`simcore.cost.partition.partition`'s split, a layer's tensor-parallel collectives are the engine's own layer cost
(`simcore.cost.workload.layer_cost`: the collective model on each pipeline rank's real groups, every replica's at
once, with what tp_comm_overlap or the asynchronous all-reduce hides), the optimizer step is
`simcore.cost.compute.optimizer.optimizer_step_s`, ring traffic is `simcore.cost.comm.collectives.ring_factor` and
link bandwidths are NCCL's (`nccl_bandwidth`). What it adds is the schedule in closed form instead of events
(Narayanan et al. 2021, §3, with unequal stages): per microbatch a stage costs its layers' compute and their
tensor-parallel collectives; an iteration costs m times the slowest stage, or m times a microbatch's ZeRO 2/3
traffic (or a pipeline link's sends) where that is longer, plus the fill and drain through the other stages (their
stage times over v: (p-1)/v stage times when the stages are equal) and one send a hop, the exposed part of the
data-parallel traffic and the optimizer step. Data-parallel collectives are the engine's own
(simcore.cost.comm.collectives: its phases for the placement and each of Megatron-Core's gradient buckets,
simcore.cost.comm.grad_buckets, alone on the links), so the estimator builds the cluster's network once, when it
first needs it, and caches each collective's time by placement and size: the estimate of tens of thousands of
layouts takes a few seconds.
"""

from __future__ import annotations

import math
from collections import Counter

from simcore.cost.comm.collectives import Collective, CollectiveAlgorithm, nccl_bandwidth, ring_factor
from simcore.cost.comm.grad_buckets import gradient_buckets
from simcore.cost.compute.kernels import BYTES
from simcore.cost.compute.optimizer import optimizer_step_s
from simcore.cost.context_parallel import AllToAll, AttentionRing, Exchange, RingStep, Segment, local_model
from simcore.cost.parameters import FITTED, CostParameters
from simcore.cost.partition import StageCosts, partition, stage_costs
from simcore.cost.workload import layer_kernels
from simcore.domain.layout import CpComm, Layout, Precision, Recompute
from simcore.domain.model import LayerType, ModelShape
from simcore.domain.placement import place
from simcore.network import Network, shared_network
from simcore.planning.pipeline_time import fill_drain_s
from simcore.planning.tp_estimate import TensorParallelTimes
from topology.cluster_spec import ClusterSpec
from topology.hardware import GPUS

# A heuristic of the ordering, not fitted and not a figure of the simulator (which models the overlap as events):
# the share of overlappable data-parallel traffic counted as exposed. It only decides which candidates a bounded
# search simulates first.
OVERLAPPED_DP_SHARE = 0.1


class Estimator:
    """Closed-form tokens/s of layouts of one model on one cluster (for ordering only)."""

    def __init__(self, model: ModelShape, cluster: ClusterSpec, params: CostParameters = FITTED,
                 algorithm: CollectiveAlgorithm = CollectiveAlgorithm.AUTO) -> None:
        self.model, self.cluster, self.params, self.algorithm = model, cluster, params, algorithm
        self._network: Network | None = None  # the engine's links and collectives, built when first needed
        self._collective_s: dict[tuple[object, ...], tuple[float, float]] = {}
        self._buckets: dict[tuple[object, ...], tuple[float, float]] = {}
        self.gpu = GPUS[cluster.gpu]
        self._costs: dict[tuple[int, int, bool, Recompute], StageCosts] = {}
        self._stages: dict[tuple[object, ...], list[tuple[float, tuple[tuple[LayerType, int], ...], float]]] = {}
        self.tp = TensorParallelTimes(model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu], params,
                                      lambda: self._built().collectives)
        self._ranks: dict[tuple[object, ...], tuple[int, ...]] = {}
        self._layers: dict[tuple[object, ...], tuple[float, float, float, float, float, float]] = {}
        self._groups: dict[tuple[object, ...], tuple[int, int]] = {}
        # (a PCIe-only node: the GPUs' PCIe links, and the slower inter-socket link a node-wide ring crosses)
        self.nvlink_bytes_per_s = nccl_bandwidth(cluster.nvlink_bandwidth_bytes_per_s, "nvlink") if cluster.has_nvlink \
            else nccl_bandwidth(min(cluster.nvlink_bandwidth_bytes_per_s, cluster.pcie.socket_bandwidth_bytes_per_s
                                    if cluster.pcie else cluster.nvlink_bandwidth_bytes_per_s), "pcie")
        # A group that leaves the node shares the node's NICs among the node's GPUs.
        self.network_bytes_per_s = min(
            self.nvlink_bytes_per_s,
            nccl_bandwidth(cluster.nics_per_node * cluster.nic_bandwidth_bytes_per_s, "ib") / cluster.gpus_per_node)

    def _built(self) -> Network:
        """The engine's links and collectives of the cluster (built once, when first needed)."""
        if self._network is None:
            self._network = shared_network(self.cluster, self.algorithm)
        return self._network

    def stage_costs(self, layout: Layout) -> StageCosts:
        """The cost model's compute per microbatch of each layer type, the embedding and the logits (cached)."""
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute)
        found = self._costs.get(key)
        if found is None:
            found = self._costs[key] = stage_costs(self.model, layout.microbatch_size, layout.tp,
                                                   layout.sequence_parallel, str(layout.recompute), self.gpu,
                                                   self.params)
        return found

    def _group(self, layout: Layout, *dims: str) -> tuple[int, int]:
        """(nodes, members in each) of the group of ranks that differ only in `dims` (cached)."""
        key = (layout.dp, layout.tp, layout.pp, layout.cp, layout.placement, dims)
        found = self._groups.get(key)
        if found is None:
            sizes = {"dp": layout.dp, "tp": layout.tp, "pp": layout.pp, "cp": layout.cp}
            names = layout.placement.split(",")
            if "cp" not in names:  # an order without cp puts it right after tp (simcore/domain/placement.py)
                names.insert(names.index("tp") + 1, "cp")
            gpus, stride = [0], 1
            for name in names:
                if name in dims:
                    gpus = [g + k * stride for k in range(sizes[name]) for g in gpus]
                stride *= sizes[name]
            nodes = len({g // self.cluster.gpus_per_node for g in gpus})
            found = self._groups[key] = (nodes, len(gpus) // nodes)
        return found

    def _bandwidth(self, layout: Layout, *dims: str) -> float:
        """Per-GPU bandwidth of a ring over the group of ranks that differ only in `dims` (data parallelism's
        gradients: ("dp", "cp")): NVLink if the group stays in a node."""
        nodes, members = self._group(layout, *dims)
        if nodes == 1:
            return self.nvlink_bytes_per_s
        # A group that leaves the node has `members` in each node, each with its share of the node's NICs: NCCL
        # runs a ring (channel) through each of them, so the group's ring moves that many shares at once, up to
        # NVLink's rate inside the node.
        return min(self.nvlink_bytes_per_s, members * self.network_bytes_per_s)

    def _leaves_node(self, layout: Layout, *dims: str) -> bool:
        return self._group(layout, *dims)[0] > 1

    def dp_collective_s(self, layout: Layout, kind: Collective, size_bytes: float) -> float:
        """Seconds of one data-parallel collective of `size_bytes` over the DP x CP groups of a pipeline rank,
        all its tensor ranks' groups at once, alone on the links: the engine's own phases for it (NCCL's choice
        for the size on the cluster's links, simcore.cost.comm.collectives), so the estimate sees the bandwidth the
        engine gives a bucket of that size."""
        return sum(self._collective_parts(layout, kind, size_bytes))

    def _collective_parts(self, layout: Layout, kind: Collective, size_bytes: float) -> tuple[float, float]:
        """`dp_collective_s` as (its phases' latencies, their transfers) (cached)."""
        key = (layout.dp, layout.tp, layout.pp, layout.cp, layout.placement, kind, size_bytes)
        found = self._collective_s.get(key)
        if found is None:
            model = self._built().collectives
            placement = place(layout.dp, layout.tp, layout.pp, layout.placement, self.cluster.num_gpus, layout.cp)
            phases = model.data_parallel_phases(kind, placement, 0, size_bytes)
            rates = [phase.isolated_rate(model.capacity) for phase in phases]
            found = self._collective_s[key] = (sum(phase.latency_s for phase in phases),
                                               sum(size_bytes / rate for rate in rates))
        return found

    def _buckets_s(self, layout: Layout, kinds: tuple[tuple[Collective, float], ...], rank_params: float,
                   rank_layers: int) -> tuple[float, float]:
        """A pipeline rank's gradient buckets (the engine's, simcore.cost.comm.grad_buckets) over its chunks, each
        bucket a collective of every (kind, bytes per parameter) in `kinds`, one after another: (the seconds of
        their latencies, of their transfers) (cached)."""
        chunks = max(1, layout.shape.chunks)
        key = (layout.dp, layout.tp, layout.pp, layout.cp, layout.placement, layout.zero_stage,
               layout.overlap_grad_reduce, chunks, kinds, rank_params, rank_layers, layout.grad_bucket_elements)
        found = self._buckets.get(key)
        if found is None:
            sizes = Counter(n for chunk in range(chunks) for n in gradient_buckets(
                int(rank_params / chunks), max(1, rank_layers // chunks), layout.dp, layout.zero_stage,
                layout.overlap_grad_reduce, chunk, layout.grad_bucket_elements))
            parts = [(count, self._collective_parts(layout, kind, n * width))
                     for n, count in sizes.items() for kind, width in kinds]
            found = self._buckets[key] = (sum(c * latency for c, (latency, _) in parts),
                                          sum(c * moving for c, (_, moving) in parts))
        return found

    def iteration_s(self, layout: Layout) -> float:
        model = self.model
        b, t, p, v, d, m = (layout.microbatch_size, layout.tp, layout.pp, layout.virtual_stages, layout.dp,
                            layout.num_microbatches)
        # Context parallelism: a rank runs s/cp tokens of each layer, its attention core as the ring's blocks; what
        # the ring's sends cannot hide under them (p2p) or all_gather's collectives add (`_layer`); gradients
        # reduce over dp x cp.
        c = layout.cp
        message = BYTES * b * model.seq_length * model.hidden_size / c
        pp_send = 2 * message / t / self._bandwidth(layout, "pp") if p > 1 else 0.0
        stream = gather = 0.0  # a microbatch's ZeRO 2/3 traffic, and ZeRO 3's gathers of one layer (single stack)
        if model.encoder_decoder:
            stages, sends = self._encoder_decoder_stages(layout, self.tp.per_rank(layout))
            shares = [self._layer(layout)[5]] * p
        else:
            layer_s, exposed_cp_s, sent_cp_s, embedding_s, logits_s, _ = self._layer(layout)
            per_rank, sends = self._layers_per_rank(layout), 1.0
            # ZeRO 2 reduce-scatters a rank's gradient buckets after every microbatch's backward, ZeRO 3 also
            # gathers each layer's parameters before its forward and its backward, the next layer's while this
            # one computes: on their own streams, beside the passes, so a microbatch takes at least that traffic's
            # time (and the context-parallel ring's sends when both leave the node: the same NICs carry them).
            # The stream runs through the bubble too: the bubble is the passes'.
            if layout.zero_stage >= 2 and d * c > 1:
                layers = max(1, max(per_rank))
                rank_params = model.total_parameters() / (t * p)
                reduce = self._buckets_s(layout, ((Collective.REDUCE_SCATTER, layout.grad_reduce_bytes),),
                                         rank_params, layers)
                stream = sum(reduce)
                if layout.zero_stage >= 3:
                    # (the gathers on a stream of their own: the engine runs it beside the gradients' stream, so
                    # their latencies overlap and only their transfers share the links)
                    per_layer = rank_params / layers
                    bucket = layout.zero3_gather_bucket_elements
                    count = max(1, math.ceil(per_layer / bucket)) if bucket else 1
                    latency, moving = self._collective_parts(layout, Collective.ALL_GATHER, per_layer / count * BYTES)
                    gather = count * (latency + moving)
                    stream = max(stream, 2 * layers * gather, reduce[1] + 2 * layers * count * moving)
                if c > 1 and self._leaves_node(layout, "cp") and self._leaves_node(layout, "dp", "cp"):
                    stream += layers * sent_cp_s
            share, first_gathers = self._layer(layout)[5], 2 * max(1, layout.shape.chunks) * gather
            stages, shares = [], []
            for r, (tp_total, tp_forward) in enumerate(self.tp.mean(layout)):
                layer = layer_s + exposed_cp_s + tp_total
                shares.append((share * layer_s + tp_forward) / layer)
                # ZeRO 3's gates (simcore/engine/data_parallel/dp_sync.py): a pass waits for its first layer's
                # gather, and each layer for what of the next one's gather its compute does not cover (Megatron
                # gathers one layer ahead), in its forward and in its backward pass.
                waits = first_gathers + per_rank[r] * (
                    max(0.0, gather - shares[r] * layer) + max(0.0, gather - (1 - shares[r]) * layer)) if gather \
                    else 0.0
                stages.append(per_rank[r] * layer + waits + (embedding_s if r == 0 else 0.0)
                              + (logits_s if r == p - 1 else 0.0))
        # The steady state runs at the slowest stage's pace; the pipeline fills and drains through the others
        # (simcore.planning.pipeline_time: unequal stages hide part of it). The pipeline sends run beside the
        # passes (the engine's transfers): a microbatch takes at least a link's sends, and the fill and drain wait
        # for one send a hop.
        slowest = max(range(p), key=stages.__getitem__)  # (its passes' forward share)
        bubble = fill_drain_s(stages, shares[slowest], m, v, layout.schedule) + (p - 1) * pp_send * sends
        pipeline = m * max(max(stages), stream, pp_send * sends * v) + bubble
        params = model.total_parameters() / (t * p)
        dp_s = 0.0
        if d * c > 1:
            if model.encoder_decoder:
                dp_s = self._encoder_decoder_dp_s(layout, params, pipeline)
            elif layout.zero_stage < 2:  # ZeRO 2 and 3: in each layer's time, above
                # once an iteration, the engine's buckets: an all-reduce (ZeRO 0), or a reduce-scatter and the
                # gather of the updated 16-bit parameters (ZeRO 1)
                kinds = ((Collective.ALL_REDUCE, layout.grad_reduce_bytes),) if layout.zero_stage == 0 else (
                    (Collective.REDUCE_SCATTER, layout.grad_reduce_bytes), (Collective.ALL_GATHER, BYTES))
                traffic = sum(self._buckets_s(layout, kinds, params, sum(self._layers_per_rank(layout)) // p))
                dp_s = traffic * OVERLAPPED_DP_SHARE if layout.overlap_grad_reduce else traffic
        shards = d * c if layout.zero_stage >= 1 else 1
        return pipeline + dp_s + optimizer_step_s(params / shards, self.gpu, self.params,
                                                  layout.precision is Precision.FP16)

    def _layer(self, layout: Layout) -> tuple[float, float, float, float, float, float]:
        """Per microbatch on one rank of a single-stack model: a layer's compute (forward, backward and
        recomputation; the mean over its layer types, weighted by their counts), the context-parallel exchange it
        cannot hide and all it sends, the embedding's and the logits' compute (cached). The kernels are the engine's
        (simcore.cost.workload.layer_kernels): MoE, MLA and FP8 kernels where the layout has them, and with
        context parallelism the rank's s/cp tokens with the attention core as its ring's blocks."""
        # A p2p ring step goes at its slowest hop's rate: one NIC's share once the ring leaves the node, and so does
        # a2a's all-to-all (most of a rank's buffer then crosses its NIC); all_gather's collectives at the group's
        # (_bandwidth).
        cp_bandwidth = 0.0
        if layout.cp > 1:
            cp_bandwidth = self._bandwidth(layout, "cp")
            if layout.cp_comm is not CpComm.ALL_GATHER and self._leaves_node(layout, "cp"):
                cp_bandwidth = self.network_bytes_per_s
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute, layout.cp,
               layout.cp_comm, layout.fp8, layout.ep, layout.expert_tp, cp_bandwidth)
        found = self._layers.get(key)
        if found is not None:
            return found
        local = local_model(self.model, layout.cp)
        total = exposed = sent = forward = 0.0
        count = 0
        for layer, n in local.layer_stacks():
            kernels = layer_kernels(local, layer, layout, self.gpu, self.params)
            redo = kernels.forward if layout.recompute is Recompute.FULL else \
                kernels.core if layout.recompute is Recompute.SELECTIVE else 0.0
            total += n * (kernels.forward + kernels.backward + redo)
            forward += n * kernels.forward
            if kernels.ring is not None:
                ring_exposed, ring_sent = self._ring_exposed(kernels.ring, layout, cp_bandwidth)
                exposed += n * ring_exposed
                sent += n * ring_sent
            count += n
        costs = stage_costs(local, layout.microbatch_size, layout.tp, layout.sequence_parallel,
                            str(layout.recompute), self.gpu, self.params)
        found = self._layers[key] = (total / count, exposed / count, sent / count, costs.embedding, costs.logits,
                                     forward / total)
        return found

    def _ring_exposed(self, ring: AttentionRing, layout: Layout, bandwidth: float) -> tuple[float, float]:
        """What one layer's context-parallel exchange adds to its compute (each ring step's send beyond its
        attention block (p2p), all_gather's collectives or a2a's all-to-alls whole) and the seconds of all it sends,
        at `bandwidth`;
        recomputation runs the forward ring again."""

        def exposed(segments: tuple[Segment, ...]) -> tuple[float, float]:
            seconds = sent = 0.0
            for segment in segments:
                if isinstance(segment, RingStep):
                    send = segment.send_bytes / bandwidth
                    seconds += max(0.0, send - segment.compute_s)
                    sent += send
                elif isinstance(segment, Exchange):
                    send = ring_factor(segment.kind, layout.cp) * segment.size_bytes / bandwidth
                    seconds += send
                    sent += send
                elif isinstance(segment, AllToAll):  # a2a: (cp-1)/cp of the buffer, waited for
                    send = (layout.cp - 1) / layout.cp * segment.size_bytes / bandwidth
                    seconds += send
                    sent += send
            return seconds, sent

        forward, backward = exposed(ring.forward), exposed(ring.backward)
        again = 1 if layout.recompute is not Recompute.NONE else 0
        return forward[0] * (1 + again) + backward[0], forward[1] * (1 + again) + backward[1]

    def _layers_per_rank(self, layout: Layout) -> tuple[int, ...]:
        """Layers each pipeline rank holds (all its chunks) in the simulator's split of a single stack."""
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute, layout.pp,
               layout.shape, layout.pipeline_partition)
        found = self._ranks.get(key)
        if found is None:
            shape = layout.shape
            chunks, _ = partition(self.model, layout.pp, shape.pieces // layout.pp, layout.pipeline_partition,
                                  self.stage_costs(layout))
            per_rank = [0] * layout.pp
            for piece, runs in enumerate(chunks):  # DualPipe: a rank's two pieces run half the microbatches each
                per_rank[shape.rank(piece) if shape.pieces > layout.pp else piece] += sum(n for _, n in runs)
            found = self._ranks[key] = tuple(per_rank)
        return found

    def _encoder_decoder_dp_s(self, layout: Layout, params: float, pipeline: float) -> float:
        """The exposed data-parallel traffic of an encoder-decoder layout, as a ring at the group's bandwidth: an
        all-reduce once an iteration (ZeRO 1: a reduce-scatter and a gather, the same bytes), or ZeRO 2's
        reduce-scatter after every microbatch and ZeRO 3's gathers before every pass, less what the passes
        cover."""
        m = layout.num_microbatches
        ring = ring_factor(Collective.ALL_REDUCE, layout.dp_cp) / self._bandwidth(layout, "dp", "cp")
        grads = params * layout.grad_reduce_bytes
        traffic = ring * grads
        if layout.zero_stage >= 2:
            traffic = ring / 2 * grads * m
            if layout.zero_stage >= 3:
                traffic += ring / 2 * params * BYTES * 2 * m
        hidden = layout.overlap_grad_reduce or layout.zero_stage >= 2
        dp_s = traffic * OVERLAPPED_DP_SHARE if hidden else traffic
        return max(dp_s, traffic - pipeline) if layout.zero_stage >= 2 else dp_s

    def _encoder_decoder_stages(self, layout: Layout,
                                tp: tuple[dict[LayerType, tuple[float, float]], ...]) -> tuple[list[float], float]:
        """Each stage of an encoder-decoder layout per microbatch (the simulator's own split with each layer
        type's compute and, from `tp`, its tensor-parallel collectives) and the most a hop sends, in sends of
        seq_length tokens (between decoder stages: the target plus the encoder output)."""
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute, layout.pp,
               layout.pipeline_partition, layout.encoder_pipeline_stages)
        found = self._stages.get(key)
        if found is None:
            model = self.model
            costs = self.stage_costs(layout)
            chunks, _ = partition(model, layout.pp, 1, layout.pipeline_partition, costs,
                                  layout.encoder_pipeline_stages)
            enc, dec = model.seq_length, model.decoder_seq_length
            found = self._stages[key] = []
            decoder_started = False
            for rank, runs in enumerate(chunks):
                compute = sum(n * costs.layer[layer] for layer, n in runs)
                compute += costs.embedding if rank == 0 else 0.0
                decoder = any(layer.cross_seq for layer, _ in runs)
                compute += costs.decoder_embedding if decoder and not decoder_started else 0.0
                compute += costs.logits if rank == layout.pp - 1 else 0.0
                sends = (dec + enc) / enc if decoder and decoder_started else 1.0
                found.append((compute, tuple(runs), sends))
                decoder_started = decoder_started or decoder
        return ([compute + sum(n * tp[rank][layer][0] for layer, n in runs)
                 for rank, (compute, runs, _) in enumerate(found)], max(sends for _, _, sends in found))

    def tokens_per_s(self, layout: Layout) -> float:
        return layout.global_batch_size * self.model.tokens_per_sample / self.iteration_s(layout)
