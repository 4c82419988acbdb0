"""Ordering, simulating and explaining search candidates (no I/O).

- `Estimator`: a closed-form iteration time, only to decide which candidates to simulate first when a search is
  bounded. It never ranks: every ranked figure comes from the simulator.
- `evaluate`: one candidate through `simcore.simulate.simulate`, reduced to what a ranking needs; a picklable
  value, the same whichever process or machine ran it.
- `rank` and `explain`: the top k by simulated tokens/s, and why each is where it is.

The estimate (Narayanan et al. 2021, §3): per microbatch a stage costs its layers' forward, backward and
recomputation (the cost model's kernel times), its TP all-reduces (4 per layer, 2(t-1)/t of the activation over
NVLink or the node's NICs), and one activation send; an iteration costs (m + (p-1)/v) such stage times (the
bubble), the exposed part of the data-parallel traffic and the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.kernels import (
    BYTES,
    embedding_forward_ops,
    layer_forward_ops,
    logits_forward_ops,
    ops_time,
)
from simcore.cost.parameters import FITTED, LINK_EFFICIENCY, CostParameters
from simcore.cost.partition import partition, split_layers, stage_costs
from simcore.cost.workload import ATTENTION_CORE, OPTIMIZER_BYTES_PER_PARAMETER
from simcore.domain.layout import Layout, Recompute
from simcore.domain.model import ModelShape
from simcore.simulate import Network, Scenario, simulate
from topology.cluster_spec import ClusterSpec
from topology.hardware import GIB, GPUS

# Share of the data-parallel traffic the estimate counts as exposed when it can overlap with backward.
_OVERLAPPED_SHARE = 0.1


class Estimator:
    """Closed-form tokens/s of layouts of one model on one cluster (for ordering only)."""

    def __init__(self, model: ModelShape, cluster: ClusterSpec, params: CostParameters = FITTED) -> None:
        self.model, self.cluster, self.params = model, cluster, params
        self.gpu = GPUS[cluster.gpu]
        self._compute: dict[tuple[int, int, bool, Recompute], tuple[float, float, float]] = {}
        self._stages: dict[tuple[object, ...], list[tuple[float, float, float]]] = {}
        self.nvlink_bytes_per_s = cluster.nvlink_bandwidth_bytes_per_s * LINK_EFFICIENCY["nvlink"]
        # A group that leaves the node shares the node's NICs among the node's GPUs.
        self.network_bytes_per_s = min(
            self.nvlink_bytes_per_s,
            cluster.nics_per_node * cluster.nic_bandwidth_bytes_per_s * LINK_EFFICIENCY["ib"]
            / cluster.gpus_per_node)

    def _costs(self, b: int, t: int, sp: bool, recompute: Recompute) -> tuple[float, float, float]:
        """Per microbatch: one layer's forward + backward + recomputation, embedding and logits (fwd + bwd)."""
        key = (b, t, sp, recompute)
        found = self._compute.get(key)
        if found is None:
            model, gpu, params = self.model, self.gpu, self.params
            ops = layer_forward_ops(model, b, t, sp)
            forward = ops_time(ops, gpu, params)
            backward = ops_time(tuple(op.backward() for op in ops), gpu, params)
            if recompute is Recompute.FULL:
                redo = forward
            elif recompute is Recompute.SELECTIVE:
                redo = ops_time(tuple(op for op in ops if op.name in ATTENTION_CORE), gpu, params)
            else:
                redo = 0.0
            emb = embedding_forward_ops(model, b, t)
            logits = logits_forward_ops(model, b, t, sp)
            found = self._compute[key] = (
                forward + backward + redo,
                ops_time(emb, gpu, params) + ops_time(tuple(op.backward() for op in emb), gpu, params),
                ops_time(logits, gpu, params) + ops_time(tuple(op.backward() for op in logits), gpu, params))
        return found

    def _bandwidth(self, layout: Layout, dim: str) -> float:
        """Per-GPU bandwidth of a ring over the layout's `dim` group: NVLink if the group stays in a node."""
        sizes = {"dp": layout.dp, "tp": layout.tp, "pp": layout.pp}
        stride = 1
        for name in layout.placement.split(","):
            if name == dim:
                break
            stride *= sizes[name]
        inside = stride * sizes[dim] <= self.cluster.gpus_per_node
        return self.nvlink_bytes_per_s if inside else self.network_bytes_per_s

    def iteration_s(self, layout: Layout) -> float:
        model = self.model
        b, t, p, v, d, m = (layout.microbatch_size, layout.tp, layout.pp, layout.virtual_stages, layout.dp,
                            layout.num_microbatches)
        layer, emb, logits = self._costs(b, t, layout.sequence_parallel, layout.recompute)
        message = BYTES * b * model.seq_length * model.hidden_size
        tp_layer = 0.0
        if t > 1:
            collectives = 6 if layout.recompute is Recompute.FULL else 4
            tp_layer = collectives * 2 * (t - 1) / t * message / self._bandwidth(layout, "tp")
            if layout.tp_comm_overlap:
                tp_layer *= 0.5
        pp_send = 2 * message / t / self._bandwidth(layout, "pp") if p > 1 else 0.0
        if model.encoder_decoder:
            stage = self._encoder_decoder_stage(layout, tp_layer, pp_send)
        else:
            counts = split_layers(model.num_layers, p * v)
            per_rank = [0] * p
            for vs, layers in enumerate(counts):
                per_rank[vs % p] += layers
            stage = max(per_rank[r] * (layer + tp_layer) + (emb if r == 0 else 0.0)
                        + (logits if r == p - 1 else 0.0) + pp_send * v for r in range(p))
        pipeline = (m + (p - 1) / v) * stage
        params = model.total_parameters() / (t * p)
        dp_s = 0.0
        if d > 1:
            ring = 2 * (d - 1) / d / self._bandwidth(layout, "dp")
            grads = params * layout.grad_reduce_bytes
            traffic = ring * grads  # an all-reduce (ZeRO 1: a reduce-scatter and a gather, the same bytes)
            if layout.zero_stage >= 2:
                traffic = ring / 2 * grads * m  # a reduce-scatter after every microbatch
            if layout.zero_stage >= 3:
                traffic += ring / 2 * params * BYTES * 2 * m  # a gather before every forward and backward
            hidden = layout.overlap_grad_reduce or layout.zero_stage >= 2
            dp_s = traffic * _OVERLAPPED_SHARE if hidden else traffic
            if layout.zero_stage >= 2:
                dp_s = max(dp_s, traffic - pipeline)  # what the passes cannot cover
        shards = d if layout.zero_stage >= 1 else 1
        optimizer_s = params / shards * OPTIMIZER_BYTES_PER_PARAMETER / (
            self.gpu.hbm_bandwidth_bytes_per_s * self.params.memory_efficiency)
        return pipeline + dp_s + optimizer_s

    def _encoder_decoder_stage(self, layout: Layout, tp_layer: float, pp_send: float) -> float:
        """The slowest stage of an encoder-decoder layout: the simulator's own split (simcore/partition.py) with
        each layer type's compute; `tp_layer` and `pp_send` are for seq_length tokens, scaled by what each layer
        type and stage boundary really carries (a decoder layer: three collectives of the target's tokens a
        direction and one of the encoder output in backward; between decoder stages: target plus encoder
        output)."""
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute, layout.pp,
               layout.pipeline_partition, layout.encoder_pipeline_stages)
        found = self._stages.get(key)
        if found is None:
            model = self.model
            costs = stage_costs(model, layout.microbatch_size, layout.tp, layout.sequence_parallel,
                                str(layout.recompute), self.gpu, self.params)
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
                tp_units = sum(n * ((6 * dec + enc) / (4 * enc) if layer.cross_seq else 1.0) for layer, n in runs)
                sends = (dec + enc) / enc if decoder and decoder_started else 1.0
                found.append((compute, tp_units, sends))
                decoder_started = decoder_started or decoder
        return max(compute + units * tp_layer + pp_send * sends for compute, units, sends in found)

    def tokens_per_s(self, layout: Layout) -> float:
        return layout.global_batch_size * self.model.tokens_per_sample / self.iteration_s(layout)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What the simulator said about one candidate (ranked by tokens_per_s)."""

    index: int
    tokens_per_s: float
    samples_per_s: float
    iteration_time_s: float
    mfu: float
    hardware_tflops_per_gpu: float
    bubble_fraction: float
    pipeline_overhead: float
    time_breakdown_s: dict[str, float]
    communication_s: dict[str, float]
    peak_memory_gib: float
    capacity_gib: float
    fits: bool
    warnings: tuple[str, ...]
    events: int

    @property
    def exposed_communication_s(self) -> dict[str, float]:
        """Communication the critical rank's compute stream waited for, by kind (ZeRO's gathers count as dp)."""
        b = self.time_breakdown_s
        return {"tp": b["tp_comm"], "pp": b["pp_comm"], "dp": b["dp_comm"]}

    @property
    def headroom_gib(self) -> float:
        return self.capacity_gib - self.peak_memory_gib


def evaluate(task: tuple[int, Scenario], network: Network | None = None) -> Evaluation:
    """Simulate one candidate (no spans kept). A module-level function so that process pools and Ray can run it;
    `network` may carry the built cluster of earlier candidates on the same cluster."""
    index, scenario = task
    outcome = simulate(replace(scenario, keep_spans=False), network)
    m = outcome.metrics
    return Evaluation(
        index=index, tokens_per_s=m.tokens_per_s, samples_per_s=m.samples_per_s,
        iteration_time_s=m.iteration_time_s, mfu=m.mfu, hardware_tflops_per_gpu=m.hardware_tflops_per_gpu,
        bubble_fraction=m.bubble_fraction, pipeline_overhead=m.pipeline_overhead,
        time_breakdown_s=dict(m.time_breakdown_s), communication_s=dict(m.communication_s),
        peak_memory_gib=m.peak_stage.memory.total / GIB, capacity_gib=m.capacity_gib, fits=m.fits,
        warnings=outcome.warnings, events=outcome.events)


def rank(evaluations: list[Evaluation], k: int) -> list[Evaluation]:
    """The k fastest by tokens/s; ties go to the earlier candidate (enumeration order), so the order never
    depends on which worker finished first."""
    return sorted(evaluations, key=lambda e: (-e.tokens_per_s, e.index))[:k]


def describe(layout: Layout) -> str:
    """A layout in one short line, e.g. 'DP 6 x TP 8 x PP 64, mb 1, 1f1b, ZeRO 1, recompute full'."""
    parts = [f"DP {layout.dp} x TP {layout.tp} x PP {layout.pp}", f"mb {layout.microbatch_size}"]
    parts.append(f"{layout.schedule} v{layout.virtual_stages}" if layout.virtual_stages > 1 else str(layout.schedule))
    parts.append(f"ZeRO {layout.zero_stage}")
    parts.append(f"recompute {layout.recompute}")
    if layout.sequence_parallel:
        parts.append("SP" + (" + TP overlap" if layout.tp_comm_overlap else ""))
    if layout.fp8 is not None:
        parts.append(f"fp8 {layout.fp8}")
    if layout.placement != "tp,dp,pp":
        parts.append(f"placement {layout.placement}")
    if not layout.overlap_grad_reduce:
        parts.append("no grad overlap")
    return ", ".join(parts)


def explain(layout: Layout, e: Evaluation, best: Evaluation | None = None) -> list[str]:
    """Why a candidate ranks where it does: its bubble, its exposed communication, its memory headroom, and
    (for a runner-up) how far it is from the best."""
    m = layout.num_microbatches
    T = e.iteration_time_s
    if layout.pp > 1:
        shape = f"{layout.pp} stages, {m} microbatches" + (
            f", {layout.virtual_stages} chunks per rank" if layout.virtual_stages > 1 else "")
        bubble = f"pipeline bubble {100 * e.bubble_fraction:.1f}% of the iteration ({shape})"
    else:
        bubble = "no pipeline, no bubble"
    exposed = e.exposed_communication_s
    total = sum(exposed.values())
    comm = (f"exposed communication {total:.3g} s ({100 * total / T:.1f}%): "
            + ", ".join(f"{kind} {seconds:.3g} s" for kind, seconds in exposed.items()))
    memory = (f"memory {e.peak_memory_gib:.1f} of {e.capacity_gib:.0f} GiB per GPU, "
              f"{e.headroom_gib:.1f} GiB headroom")
    compute = (f"{e.hardware_tflops_per_gpu:.0f} hardware TFLOP/s per GPU, MFU {100 * e.mfu:.1f}%, "
               f"recompute {e.time_breakdown_s['recompute']:.3g} s")
    lines = [bubble, comm, memory, compute]
    if best is not None and best.index != e.index:
        lines.append(f"{100 * (1 - e.tokens_per_s / best.tokens_per_s):.1f}% fewer tokens/s than the best")
    return lines
