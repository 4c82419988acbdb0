"""What a simulation will cost before it runs: its engine events, the cluster graph it builds, the spans of its
trace, and from them the wall time and the peak memory of the process that runs it (for admission limits).

Nothing is built: the counts follow the engine's own structure, so a request cannot make the simulator work
where the estimate does not look.
- Pipeline passes: 2 x microbatches x model chunks per pipeline rank (3 with the schedules that split backward
  passes into input and weight gradients: zb_*, dualpipe), on `pp` ranks of one data-parallel replica
  (representative fidelity) or of all `dp` (full fidelity, uneven compute across GPUs, or a heterogeneous
  cluster whose replicas of a stage run on different GPU kinds); twice with
  `optimizer_post_validation`, which simulates two iterations.
- Data-parallel collectives per simulated rank (simcore.engine.data_parallel.dp_sync): its gradient buckets (Megatron's
  max(40M, 1M x dp) elements when the reduction overlaps backward, else one per model chunk; with ZeRO 3 one per
  layer), reduced once per iteration (ZeRO 0, 1) or after every backward pass (ZeRO 2, 3), and gathered once
  (ZeRO 1, 2) or, with ZeRO 3, every layer before every pass, in `ceil(layer / zero3_gather_bucket_elements)`
  all-gathers each. Each collective is a flow group over its `dp` members: the flow network's work on it grows
  with that width.
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
from simcore.cost.memory import SPLITS
from simcore.cost.per_gpu import rank_gpus, replicas_differ
from simcore.domain.layout import Fidelity
from simcore.domain.placement import place
from simcore.simulate import Scenario
from topology.cluster_spec import LEAF_DOWN_PORTS, Fabric

__all__ = ["Cost", "estimate_cost"]

# Engine events per pipeline pass: the pass itself, its wait, its send and the flow network's start and finish
# (`python bench/speed_1t.py` counts 259,518 events for the 1T example's 65,536 passes, 3.96 a pass).
EVENTS_PER_PASS = 4.2
# Per simulated pipeline rank, its events outside the passes (optimizer step, waits for the data-parallel
# collectives and the other ranks): a 1-GPU iteration makes 3.
EVENTS_PER_RANK = 64
# Engine events per data-parallel collective: its job on the stream, the flow group's start and finish, and its
# completion callback (GPT-3 350M on 16 A100s, dp 8, pp 2, 32 microbatches, ZeRO 3 in 100,000-element gathers:
# 205,780 events simulated, 229,894 estimated).
EVENTS_PER_COLLECTIVE = 4.0

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


def _collectives_per_rank(scenario: Scenario) -> int:
    """Data-parallel collectives one simulated pipeline rank runs in an iteration."""
    layout, model = scenario.layout, scenario.model
    if layout.dp <= 1:
        return 0
    m, v = layout.num_microbatches, layout.shape.chunks
    chunks = layout.pp * v
    layers = sum(count for _, count in model.layer_stacks())
    layers_per_chunk = max(1, -(-layers // chunks))
    chunk_parameters = model.total_parameters() / (layout.tp * chunks)
    if layout.zero_stage >= 3:
        buckets = [layers_per_chunk] * v
    else:
        size = bucket_elements(layout.dp)
        first = max(1, math.ceil(chunk_parameters / size)) if layout.overlap_grad_reduce else 1
        buckets = [first] + [1] * (v - 1)
    reductions = m * sum(buckets) if layout.zero_stage >= 2 else sum(buckets)
    if layout.zero_stage == 3:
        bucket = layout.zero3_gather_bucket_elements
        per_layer = chunk_parameters / layers_per_chunk
        per_gather = max(1, math.ceil(per_layer / bucket)) if bucket else 1
        gathers = 2 * m * v * layers_per_chunk * per_gather
    elif layout.zero_stage in (1, 2):
        gathers = sum(buckets)
    else:
        gathers = 0
    return reductions + gathers


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
    layout = scenario.layout
    full = (scenario.fidelity is Fidelity.FULL or scenario.cluster.health.uneven_compute
            or _replicas_differ(scenario))  # as simulate() decides
    replicas = layout.dp if full else 1
    ranks = replicas * layout.pp
    iterations = 2 if layout.optimizer_post_validation else 1
    per_microbatch = 3 if layout.schedule in SPLITS else 2  # F, I, W or F, B per microbatch and chunk
    passes = per_microbatch * layout.num_microbatches * layout.shape.chunks * ranks * iterations
    collectives = _collectives_per_rank(scenario) * ranks * iterations
    members = collectives * layout.dp * layout.cp
    per_pass = EVENTS_PER_PASS
    if layout.cp > 1:  # context parallelism runs each layer's ring steps as events: a step and its send's flow
        # (measured: 9.3 a layer and pass at cp 2 on dgxc2411-llama31-8b-bf16-8gpu, 18,955 events)
        per_pass += (4 * layout.cp + 1) * scenario.model.num_layers / (layout.pp * layout.virtual_stages)
    events = int(per_pass * passes + EVENTS_PER_COLLECTIVE * collectives) + EVENTS_PER_RANK * ranks
    graph = _graph_elements(scenario)
    layers = sum(count for _, count in scenario.model.layer_stacks())
    partition = layers * layout.pp * layout.virtual_stages
    spans = int(SPANS_PER_UNIT * (passes + collectives + ranks)) if scenario.keep_spans else 0
    seconds = (SECONDS_FIXED + SECONDS_PER_EVENT * events + SECONDS_PER_COLLECTIVE_MEMBER * members
               + SECONDS_PER_GRAPH_ELEMENT * graph + SECONDS_PER_PARTITION_STEP * partition + SECONDS_PER_SPAN * spans)
    memory = (BYTES_FIXED + BYTES_PER_GRAPH_ELEMENT * graph + BYTES_PER_SPAN * spans + BYTES_PER_EVENT * events
              + BYTES_PER_PARTITION_STEP * partition)
    return Cost(events, collectives, members, graph, partition, spans, int(TRACE_BYTES_PER_SPAN * spans), seconds,
                int(memory))
