"""What a simulation will cost before it runs: its engine events, the cluster graph it builds, the spans of its
trace, and from them the wall time and the peak memory of the process that runs it (for admission limits).

Nothing is built: the counts follow the engine's own structure, so a request cannot make the simulator work
where the estimate does not look.
- Pipeline passes: 2 x microbatches x model chunks per pipeline rank (3 with the schedules that split backward
  passes into input and weight gradients: zb_*, dualpipe), on `pp` ranks of one data-parallel replica
  (representative fidelity) or of all `dp` (full fidelity, uneven compute across GPUs, or a heterogeneous
  cluster whose replicas of a stage run on different GPU kinds); twice with
  `optimizer_post_validation`, which simulates two iterations. Each forward and backward pass of a model chunk
  sends its activations or gradients to the next stage's rank (2 x microbatches x (pp x chunks - 1) sends).
- Data-parallel collectives per simulated rank (simcore.engine.data_parallel.dp_sync): its gradient buckets over
  the DP x CP group (layout.grad_bucket_elements, else Megatron's max(40M, 1M x dp) elements, on the first pipeline
  rank's first chunk when the reduction overlaps backward, else one per model chunk; with ZeRO 3 one per layer),
  reduced once per iteration (ZeRO 0, 1) or after every backward pass (ZeRO 2, 3), and gathered once (ZeRO 1, 2)
  or, with ZeRO 3, every layer before every pass, in `ceil(layer / zero3_gather_bucket_elements)` all-gathers each.
  The buckets hold what the engine reduces: a tensor rank's dense weights (over tp) and its experts' (over ep x
  expert_tp, weighted by the expert group's share of the traffic), so a MoE model's experts, not split by tp, count
  in full. DeepSpeed's ZeRO 3 (deepspeed, deepspeed_2021) instead visits each sub-module in each pass and gathers
  those over its persistence threshold, reduces its gradients in buckets (per parameter in 2021), and with
  ZeRO++'s qgZ runs two all-to-alls per matrix gradient (`_submodule_collectives`). In full fidelity one
  collective serves every replica of a group. Each collective is a flow group over its `dp x cp` members: the
  flow network's work on it grows with that width.
- Tensor-parallel groups that leave their NVLink domain run each pass's TP traffic as a flow (tp_links.py).
- Context parallelism (p2p): each layer of a forward pass runs cp ring steps, cp - 1 of them sending K/V, and
  its backward cp steps that send, plus the recomputed forward (full) or attention (selective); all_gather
  runs an exchange or two and two blocks a layer instead (context_parallel.py).
- Every flow group on the network (a send, a collective, a TP transfer, a ring send) costs its start's
  latency timer, its finish, and a reschedule whenever a group sharing its links starts or ends.
- The cluster graph (topology.graph), exactly: a node per GPU, NVLink switch, NIC, leaf and spine switch, and a
  link each way per GPU to its switch and its NIC, per NIC to its leaf, per leaf to each spine.
- The partition of layers into stages: its search over caps grows with layers x stages.
- The trace: about five spans per pass and per collective (the pass, its exposed communication, waits and the
  lanes' transfers), each some 12 bytes once gzip-compressed as it is stored.

The per-unit costs are measured: a least-squares fit (relative errors, non-negative coefficients) of the CPU
seconds and peak resident bytes of 320 runs of `python bench/admission.py` with seeds 7 (120 runs) and 1 (200)
on the 2-core development machine (per span rescaled to the spans counted since), except the partition's (timed
on its own: `_balanced` over 512,000 caps took 0.51 s; its bytes are an upper bound, a float in a set).
`python bench/admission.py` (seed 2) compares the estimate with 200 other runs and prints the ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.cost.comm.grad_buckets import bucket_elements
from simcore.cost.layer_params import layer_submodules
from simcore.cost.memory import SPLITS
from simcore.cost.moe import expert_reduce_ratio
from simcore.cost.per_gpu import rank_gpus, replicas_differ
from simcore.cost.sharding import Unit
from simcore.cost.sharding import policy as sharding_policy
from simcore.domain.hybrid_shard import hybrid
from simcore.domain.layout import CpComm, Fidelity, Layout, Recompute
from simcore.domain.placement import place
from simcore.simulate import Scenario
from topology.cluster_spec import LEAF_DOWN_PORTS, Fabric

__all__ = ["Cost", "estimate_cost", "reduced_parameters"]

# Engine events per flow group on the network: its latency timer, its finish and its reschedules when groups that
# share its links come and go. Counted with the engine's own counters of each part (the flow network's, the
# sends', the collectives') over 213 candidates of 9 searches: 1.7 a pipeline send, 2.3 a collective or TP
# transfer, 2.0-2.4 a ring send (least squares); taken above them, so that a candidate's engine events are at
# most 1.15x the estimate (`python bench/search_admission.py --events 3 --seed 5`: 0.63-1.15 over 93 candidates).
EVENTS_PER_FLOW = 2.5
# A context-parallel ring send beside ZeRO 2 or 3's traffic of every microbatch: both on the same NICs, each
# start and end of the one reschedules the other (measured 2.2-4.3 a send with ZeRO 2, 2.8-7.3 with ZeRO 3).
EVENTS_PER_SHARED_FLOW = 5.0
# Engine events besides the flows: per compute pass (its timer), per ZeRO 3 slice of a pass (each layer's gathered
# parameters), per pipeline send, data-parallel collective and TP transfer (its start), per gradient bucket a
# replica releases to its stream.
EVENTS_PER_PASS = 1.0
EVENTS_PER_SLICE = 1.0
EVENTS_PER_START = 1.0
EVENTS_PER_RELEASE = 1.0
# Per simulated pipeline rank, its events outside the passes (optimizer step, waits for the data-parallel
# collectives and the other ranks): a 1-GPU iteration makes 3.
EVENTS_PER_RANK = 64

# CPU time of the process: its start (forkserver) and the result's conversion, then per event, per member of a
# collective (the flow network's work on a wide group), per graph element, per partition step, per span.
SECONDS_FIXED = 0.121
SECONDS_PER_EVENT = 2.8e-6
SECONDS_PER_COLLECTIVE_MEMBER = 2.8e-8
SECONDS_PER_GRAPH_ELEMENT = 1.12e-5
SECONDS_PER_PARTITION_STEP = 1.0e-6
SECONDS_PER_SPAN = 8.4e-6
# Peak resident memory of the process: what it starts with (the simulator imported), then per graph element
# (networkx dicts and the route caches), per span kept (the span, its trace event and its JSON text), per
# event's bookkeeping alive at once, per partition step (the sorted caps).
BYTES_FIXED = 49_000_000
BYTES_PER_GRAPH_ELEMENT = 1_200
BYTES_PER_SPAN = 590
BYTES_PER_EVENT = 12
BYTES_PER_PARTITION_STEP = 100
# Spans recorded per pass, collective and rank, and the stored (gzip) bytes per span: the 1T example at 128
# microbatches records 85,754 spans (5.19 per unit counted here) in 1,047,569 compressed bytes; the m8 example
# 679 (4.99) in 7,610.
SPANS_PER_UNIT = 5.0
TRACE_BYTES_PER_SPAN = 12.5


@dataclass(frozen=True, slots=True)
class Cost:
    """A simulation's estimated work and what it takes to run (see the module docstring)."""

    events: int
    collectives: int
    collective_members: int
    graph_elements: int
    partition_steps: int
    spans: int
    trace_bytes: int
    seconds: float
    memory_bytes: int


def _graph_elements(scenario: Scenario) -> int:
    """The cluster graph's vertices and directed edges (topology.graph.build_cluster: a link is two edges)."""
    spec = scenario.cluster
    if spec.topology is not None:  # the user's graph: its nodes and directed links, counted
        return len(spec.topology.nodes) + len(spec.topology.links)
    nodes, gpus, nics = spec.num_nodes, spec.num_gpus, spec.num_nodes * spec.nics_per_node
    switches = -(-gpus // spec.domain_gpus) if spec.domain_gpus % spec.gpus_per_node == 0 else sum(
        1 for n in range(nodes) if n * spec.gpus_per_node % spec.domain_gpus == 0)
    if nodes == 1:
        leaves = 0
    elif spec.fabric is Fabric.RAIL_OPTIMIZED:
        leaves = ((nodes - 1) // LEAF_DOWN_PORTS + 1) * spec.nics_per_node
    else:
        leaves = (nics - 1) // LEAF_DOWN_PORTS + 1
    spines = math.ceil(LEAF_DOWN_PORTS / spec.oversubscription) if leaves > 1 else 0
    pcie = spec.pcie
    if pcie is not None:  # a PCIe-only node: PCIe switches and CPU sockets in place of an NVSwitch (topology/pcie.py)
        switches = nodes * (pcie.switches + pcie.sockets)
    vertices = gpus + switches + nics + leaves + spines
    links = 2 * gpus + (nics if nodes > 1 else 0) + leaves * spines
    if pcie is not None:
        links += nodes * pcie.links_per_node // 2
    return vertices + 2 * links


def reduced_parameters(scenario: Scenario) -> float:
    """The parameters of one tensor rank of a whole pipeline replica whose gradients the data-parallel reduction
    carries, as the engine's chunks hold them (simcore.cost.workload): each layer's dense weights over tp, a MoE
    layer's experts over ep x expert_tp weighted by expert_reduce_ratio, the embedding (and positions) over tp,
    and the output layer's matrix (untied, or the tied copy on the last stage)."""
    model, layout = scenario.model, scenario.layout
    t, ratio = layout.tp, expert_reduce_ratio(layout)
    total = 0.0
    for layer, count in model.layer_stacks():
        weights = model.parameters_per_layer(layer)
        if layer.moe and model.moe is not None:
            experts = model.expert_parameters()
            total += count * ((weights - experts) // t + experts // (layout.ep * layout.expert_tp) * ratio)
        else:
            total += count * (weights // t)
    vocab = model.vocab_size * model.hidden_size // t
    total += vocab + (0 if model.encoder_decoder else model.seq_length * model.hidden_size // t)
    if not model.tied_embeddings or layout.pp * layout.shape.chunks > 1:
        total += vocab
    if model.encoder_decoder and layout.pp > 1:  # the decoder's first stage embeds the target with a copy
        total += vocab
    return total


def _collectives_per_rank(scenario: Scenario) -> tuple[int, int]:
    """Data-parallel collectives one simulated pipeline rank runs in an iteration, and of them ZeRO 3's per-layer
    gathers (each a slice of a pass)."""
    layout, model = scenario.layout, scenario.model
    if layout.dp_cp <= 1:
        return 0, 0
    m, v = layout.num_microbatches, layout.shape.chunks
    chunks = layout.pp * v
    layers = sum(count for _, count in model.layer_stacks())
    layers_per_chunk = max(1, -(-layers // chunks))
    chunk_parameters = reduced_parameters(scenario) / chunks
    if layout.zero_stage >= 3:
        buckets = [layers_per_chunk] * v
    else:
        size = bucket_elements(layout.dp, layout.grad_bucket_elements)
        first = max(1, math.ceil(chunk_parameters / size)) if layout.overlap_grad_reduce else 1
        # only the first pipeline rank's first chunk is bucketed (grad_buckets.py): a rank's mean, rounded up
        buckets = [-(-(first + layout.pp - 1) // layout.pp)] + [1] * (v - 1)
    reductions = m * sum(buckets) if layout.zero_stage >= 2 else sum(buckets)
    reductions *= 2 if hybrid(layout) else 1  # HSDP: each reduce-scatter's all-reduce across the shard groups
    if layout.zero_stage == 3 and _per_submodule(layout):
        return _submodule_collectives(scenario, m * v, layers_per_chunk, chunk_parameters)
    if layout.zero_stage == 3:
        bucket = layout.zero3_gather_bucket_elements
        per_layer = chunk_parameters / layers_per_chunk
        per_gather = max(1, math.ceil(per_layer / bucket)) if bucket else 1
        return reductions + 2 * m * v * layers_per_chunk * per_gather, 2 * m * v * layers_per_chunk
    gathers = sum(buckets) if layout.zero_stage in (1, 2) else 0
    return reductions + gathers, 0


def _per_submodule(layout: Layout) -> bool:
    found = sharding_policy(layout.zero_implementation)
    return found is not None and found.per_submodule


def _submodule_collectives(scenario: Scenario, chunk_passes: int, layers: int,
                           chunk_parameters: float) -> tuple[int, int]:
    """DeepSpeed's ZeRO 3 (simcore/engine/data_parallel/sharded.py), for `chunk_passes` microbatches of a model
    chunk of `layers` layers: a visit of each sub-module a pass (the recomputation visits them again), a gather of
    each that holds a parameter over the persistence threshold (per parameter for deepspeed_2021; reuse ignored: an
    upper bound), and the gradient reductions: a bucket's, each parameter's (deepspeed_2021), or with ZeRO++'s qgZ
    each matrix's two all-to-alls and each vector's reduce-scatter."""
    layout, model = scenario.layout, scenario.model
    found = sharding_policy(layout.zero_implementation)
    assert found is not None
    mods = layer_submodules(model, model.main_layer(), layout.tp)
    tensors = [p for params, _ in mods for p in params]
    threshold = found.persistence_threshold
    gathered = sum(p >= threshold for p in tensors) if found.per_parameter else sum(
        any(p >= threshold for p in params) for params, _ in mods)
    passes = 3 if layout.recompute is Recompute.FULL and found.regather_on_recompute else 2
    matrices = sum(sum(Unit(params, 0, weight).matrices()) for params, weight in mods)
    layer_passes = chunk_passes * layers
    if layout.zero_quantized_gradients:
        reductions = layer_passes * (2 * matrices + len(tensors) - matrices)
    elif found.per_parameter:
        reductions = layer_passes * len(tensors)
    else:  # a bucket of reduce_bucket_elements at a time
        reductions = chunk_passes * max(1, math.ceil(chunk_parameters / found.reduce_bucket_elements))
    return reductions + layer_passes * gathered * passes, layer_passes * len(mods) * passes


def _tp_crossing_ranks(scenario: Scenario) -> int:
    """Pipeline ranks whose tensor-parallel group spans more than one NVLink domain (its TP traffic then runs
    on the links, a flow a pass: simcore/engine/tp_links.py; not when it overlaps GEMMs, nor ZeRO 3's slices)."""
    layout, spec = scenario.layout, scenario.cluster
    if layout.tp == 1 or layout.tp_comm_overlap or layout.zero_stage >= 3:
        return 0
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, spec.num_gpus, layout.cp)
    domain = spec.domain_gpus
    return sum(len({gpu // domain for gpu in placement.tp_group(0, rank)}) > 1 for rank in range(layout.pp))


def _ring_per_layer(layout: Layout) -> tuple[int, int]:
    """Context parallelism's engine events and flows of one layer in a forward and a backward pass together
    (simcore.cost.context_parallel: p2p's ring steps and sends, all_gather's exchanges and blocks, a2a's
    all-to-alls around its kernel; the backward pass recomputes the forward or its attention first)."""
    cp = layout.cp
    if layout.cp_comm is CpComm.ALL_GATHER:
        forward, backward, attention = (5, 1), (6, 2), (3, 1)
    elif layout.cp_comm is CpComm.A2A:  # compute, all-to-all, kernel, all-to-all, compute: each way
        forward, backward, attention = (5, 2), (5, 2), (3, 2)
    else:  # the layer's compute around the attention (2), its steps, a send each but the forward's last
        forward, backward, attention = (2 + 2 * cp - 1, cp - 1), (2 + 2 * cp, cp), (2 * cp - 1, cp - 1)
    again = forward if layout.recompute is Recompute.FULL else attention if \
        layout.recompute is Recompute.SELECTIVE else (0, 0)
    return forward[0] + backward[0] + again[0], forward[1] + backward[1] + again[1]


def _replicas_differ(scenario: Scenario) -> bool:
    """A heterogeneous cluster whose stages' data-parallel replicas run on different GPUs (every replica is then
    simulated: simcore/cost/per_gpu.py)."""
    cluster, layout = scenario.cluster, scenario.layout
    if not cluster.node_groups:
        return False
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    return replicas_differ(rank_gpus(cluster, placement, layout), layout.dp, layout.pp)


def estimate_cost(scenario: Scenario) -> Cost:
    """The estimated work, wall time and peak memory of simulating `scenario` (cheap: nothing is built)."""
    layout, model = scenario.layout, scenario.model
    full = (scenario.fidelity is Fidelity.FULL or scenario.cluster.health.uneven_compute
            or _replicas_differ(scenario))  # as simulate() decides
    replicas = layout.dp if full else 1
    ranks = replicas * layout.pp
    iterations = 2 if layout.optimizer_post_validation else 1
    m, v = layout.num_microbatches, layout.shape.chunks
    per_microbatch = 3 if layout.schedule in SPLITS else 2  # F, I, W or F, B per microbatch and chunk
    passes = per_microbatch * m * v * ranks * iterations
    sends = 2 * m * (layout.pp * v - 1) * replicas * iterations if layout.pp > 1 else 0
    per_rank, slices_per_rank = _collectives_per_rank(scenario)
    collectives = per_rank * layout.pp * iterations  # one per group: in full fidelity it serves every replica
    members = collectives * layout.dp * layout.cp
    tp_transfers = 2 * m * v * _tp_crossing_ranks(scenario) * replicas * iterations  # one a F or B pass
    flows = sends + collectives + tp_transfers
    events = (EVENTS_PER_PASS * passes + EVENTS_PER_SLICE * slices_per_rank * ranks * iterations
              + EVENTS_PER_START * flows + EVENTS_PER_RELEASE * per_rank * ranks * iterations
              + EVENTS_PER_RANK * ranks)
    if layout.cp > 1:
        ring, ring_sends = _ring_per_layer(layout)
        layer_pairs = m * ranks * iterations * sum(count for _, count in model.layer_stacks()) / layout.pp
        events += ring * layer_pairs
        shared = layout.zero_stage >= 2 and layout.dp_cp > 1
        events += (EVENTS_PER_SHARED_FLOW if shared else EVENTS_PER_FLOW) * ring_sends * layer_pairs
    events = int(events + EVENTS_PER_FLOW * flows)
    graph = _graph_elements(scenario)
    layers = sum(count for _, count in model.layer_stacks())
    partition = layers * layout.pp * layout.virtual_stages
    spans = int(SPANS_PER_UNIT * (passes + per_rank * ranks * iterations + ranks)) if scenario.keep_spans else 0
    seconds = (SECONDS_FIXED + SECONDS_PER_EVENT * events + SECONDS_PER_COLLECTIVE_MEMBER * members
               + SECONDS_PER_GRAPH_ELEMENT * graph + SECONDS_PER_PARTITION_STEP * partition + SECONDS_PER_SPAN * spans)
    memory = (BYTES_FIXED + BYTES_PER_GRAPH_ELEMENT * graph + BYTES_PER_SPAN * spans + BYTES_PER_EVENT * events
              + BYTES_PER_PARTITION_STEP * partition)
    return Cost(events, collectives, members, graph, partition, spans, int(TRACE_BYTES_PER_SPAN * spans), seconds,
                int(memory))
