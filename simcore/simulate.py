"""One call from a described scenario to its results: the engine's public entry point (no I/O)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from simcore.cost.compute.measured_gemm import measured_parameters
from simcore.cost.measured_notes import measured_warnings
from simcore.cost.memory import stage_memory
from simcore.cost.parameters import FITTED, CostParameters
from simcore.cost.per_gpu import cost_per_gpu, rank_gpus
from simcore.cost.sharding import sharding_units
from simcore.cost.workload import build_workload
from simcore.cost.zeropp import zeropp_costs
from simcore.domain.layout import (
    CollectiveAlgorithm,
    Fidelity,
    Layout,
    validate_layout,
    validate_precision,
)
from simcore.domain.mlperf import eval_time_s
from simcore.domain.model import ModelShape
from simcore.domain.placement import Placement, place
from simcore.domain.training import TrainingRun, validate_training
from simcore.domain.zeropp import validate_zeropp_nodes
from simcore.engine.pipeline import EngineConfig, Progress
from simcore.engine.recorder import Span
from simcore.engine.steady_state.periodic import run_engine
from simcore.errors import SpecError
from simcore.metrics import Metrics, compute_metrics
from simcore.network import Network, shared_network
from simcore.training_plan import TrainingPlan, plan_training
from topology.cluster_spec import ClusterSpec
from topology.hardware import GIB


@dataclass(frozen=True, slots=True)
class Scenario:
    model: ModelShape
    cluster: ClusterSpec
    layout: Layout
    fidelity: Fidelity = Fidelity.REPRESENTATIVE
    algorithm: CollectiveAlgorithm = CollectiveAlgorithm.AUTO
    keep_spans: bool = False
    free_communication: bool = False
    seed: int = 0  # seeds the per-GPU compute variability draws (cluster health); the engine is deterministic
    cost_parameters: CostParameters = FITTED
    training: TrainingRun | None = None  # a whole run: the outcome then carries its plan
    extrapolate: bool = True  # a checked periodic steady state may be put back rather than simulated


@dataclass(frozen=True, slots=True)
class Outcome:
    metrics: Metrics
    warnings: tuple[str, ...]
    events: int
    simulated_ranks: int
    fidelity: Fidelity
    wall_time_s: float
    spans: tuple[Span, ...]
    training: TrainingPlan | None = None
    extrapolated_periods: int = 0  # steady-state periods put back rather than simulated (per iteration simulated)


def check(scenario: Scenario) -> None:
    """Raise SpecError if the scenario breaks a rule; cheap (no graph is built)."""
    scenario.cluster.validate()
    validate_layout(scenario.layout, scenario.model, scenario.cluster.num_gpus)
    cluster, layout = scenario.cluster, scenario.layout
    for group in cluster.node_groups or ():
        validate_precision(layout, group.hardware)
    validate_precision(layout, cluster.hardware)
    validate_zeropp_nodes(layout, cluster.gpus_per_node)
    if scenario.model.lora is not None and layout.zero_stage >= 3:
        raise SpecError("layout.zero_stage", "must be at most 2 with model.lora: ZeRO 3's gathers and reduce-scatters "
                        "of a frozen base are not modelled")
    # Tensor-parallel groups (and rings) on one GPU kind each: a walk over the GPUs, so only up to a million of
    # them here (check runs before a service's size limits; simulate() applies the rule whatever the size).
    if cluster.node_groups and cluster.num_gpus <= 1 << 20:
        rank_gpus(cluster, place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp),
                  layout)
    if scenario.training is not None:
        validate_training(scenario.training)
        bench = scenario.training.mlperf
        if bench is not None and scenario.model.seq_length != bench.seq_length:
            raise SpecError("model.seq_length", f"must be {bench.seq_length} for MLPerf's {bench.name} (the "
                            f"benchmark's sequence length; given {scenario.model.seq_length})")


def straggler_factors(scenario: Scenario, placement: Placement) -> dict[tuple[int, int], float]:
    """{(replica, pipeline rank): compute time factor} of the ranks whose factor is not 1: the slowest GPU of the
    rank's tensor- and context-parallel groups, whose per-layer collectives and ring steps wait for it
    (topology/health.py draws and names them; `options.seed` seeds the draws)."""
    health = scenario.cluster.health
    if not health.uneven_compute:
        return {}
    per_gpu = health.compute_time_factors(scenario.cluster.num_gpus, scenario.seed)
    factors = {}
    for d in range(placement.dp):
        for s in range(placement.pp):
            factor = max(per_gpu[g] for c in range(placement.cp) for g in placement.tp_group(d, s, c))
            if factor != 1.0:
                factors[(d, s)] = factor
    return factors


def simulate(scenario: Scenario, network: Network | None = None, progress: Progress | None = None) -> Outcome:
    """Simulate one iteration. `network`, when given, must have been built for the scenario's cluster and
    collective algorithm; without it, the process's network of that cluster is used (simcore/network.py: built
    on the first simulation, its routes and patterns shared by the later ones). Either way only saves building
    it again: the results are the same. `progress(done, total)`,
    when given, is called while the engine runs with the compute passes finished and their number (exact: the
    schedule fixes it), about 200 times a run and once at the end; it must not change anything the engine
    sees."""
    started = time.perf_counter()
    check(scenario)
    layout, model = scenario.layout, scenario.model
    if network is None or network.spec != scenario.cluster or network.algorithm is not scenario.algorithm:
        network = shared_network(scenario.cluster, scenario.algorithm)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, scenario.cluster.num_gpus, layout.cp)
    collectives = network.collectives
    collectives.start_run()  # (what the user's tables price from here on is this run's: its warnings say where)
    gpu = scenario.cluster.hardware
    # the user's GEMM sweep (cluster.measured.gemm) beside the fitted parameters, where there is one
    params = measured_parameters(scenario.cost_parameters, scenario.cluster)
    costing = None
    if scenario.cluster.node_groups:  # every rank on its own GPU (simcore/cost/per_gpu.py)
        costing = cost_per_gpu(model, layout, scenario.cluster, placement, collectives, scenario.free_communication,
                               params)
        workload = costing.workload
        gpu = replace(gpu, peak_flops_per_s=costing.mean_peak_flops_per_s, tdp_w=costing.mean_tdp_w)
    else:
        workload = build_workload(model, layout, gpu, placement, collectives, scenario.free_communication, params)
    factors = straggler_factors(scenario, placement)
    mixed = costing.rank_workloads if costing is not None else {}
    # Ranks that differ cannot stand for each other: with stragglers, or replicas on different GPUs, every replica
    # is simulated.
    fidelity = Fidelity.FULL if factors or mixed else scenario.fidelity
    config = EngineConfig(layout, placement, workload, collectives, fidelity, scenario.free_communication,
                          scenario.keep_spans, gpu=gpu, comm_sm_share=params.comm_sm_share,
                          passes=network.passes(layout, workload), compute_time_factors=factors or None,
                          units=sharding_units(model, layout, workload), rank_workloads=mixed or None,
                          zeropp=zeropp_costs(layout, gpu, params, scenario.cluster.gpus_per_node))
    result = run_engine(config, progress, scenario.extrapolate)
    memory = stage_memory(model, layout, workload)
    if costing is None:
        metrics = compute_metrics(model, layout, gpu, workload, result, memory)
        capacities = [gpu.hbm_capacity_bytes] * len(memory)
        names = [gpu.label] * len(memory)
    else:
        metrics = compute_metrics(model, layout, gpu, workload, result, memory, costing.stage_gpus,
                                  costing.stage_capacity_bytes)
        capacities = list(costing.stage_capacity_bytes)
        names = [g.label for g in costing.stage_gpus]
    warnings = []
    stage = min(range(len(memory)), key=lambda i: (capacities[i] - memory[i].total, i))
    if memory[stage].total > capacities[stage]:
        need, have = memory[stage].total, capacities[stage]
        warnings.append(f"does not fit: stage {stage} needs {need / GIB:.1f} GiB per GPU, "
                        f"{(need - have) / GIB:.1f} GiB more than the {have / GIB:.0f} GiB of a {names[stage]}")
    customs = [g.gpu_spec for g in scenario.cluster.node_groups] or [scenario.cluster.gpu_spec]
    for custom in dict.fromkeys(c for c in customs if c is not None):
        warnings.append(f"{custom.label} is a user-defined GPU: its GEMM efficiencies are the catalog's "
                        f"{custom.generation} ones (nearest catalog GPU: {custom.kind})")
    if mixed and scenario.fidelity is not Fidelity.FULL:
        warnings.append(f"heterogeneous replicas: {len(mixed)} of {layout.dp * layout.pp} ranks run on other GPUs "
                        "than their stage's first replica, so every data-parallel replica was simulated "
                        "(fidelity full)")
    if factors and scenario.fidelity is not Fidelity.FULL:
        warnings.append(f"stragglers: {len(factors)} of {layout.dp * layout.pp} ranks compute slower (slowest "
                        f"{max(factors.values()):.3g}x), so every data-parallel replica was simulated "
                        "(fidelity full)")
    warnings += measured_warnings(model, layout, scenario.cluster, collectives.measured)
    if layout.pp > 1 and layout.num_microbatches < layout.pp:
        warnings.append(f"only {layout.num_microbatches} microbatches for {layout.pp} pipeline stages: "
                        "the pipeline never fills")
    bench = None if scenario.training is None else scenario.training.mlperf
    evaluation_s = 0.0 if bench is None else eval_time_s(
        [st.forward_s for st in metrics.stages], layout.dp * layout.microbatch_size, layout.pp, bench.eval_samples,
        layout.global_batch_size, layout.virtual_stages)
    training = None if scenario.training is None else plan_training(
        scenario.training, tokens_per_s=metrics.tokens_per_s,
        tokens_per_iteration=metrics.tokens_per_s * metrics.iteration_time_s, parameters=model.total_parameters(),
        num_gpus=scenario.cluster.num_gpus, num_nodes=scenario.cluster.num_nodes, gpu_power_w=gpu.tdp_w,
        global_batch_size=layout.global_batch_size, iteration_time_s=metrics.iteration_time_s,
        eval_time_s=evaluation_s)
    return Outcome(metrics, tuple(warnings), result.events, result.simulated_ranks, fidelity,
                   time.perf_counter() - started, tuple(result.recorder.spans), training,
                   result.extrapolated_periods)
