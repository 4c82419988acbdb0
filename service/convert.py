"""The one place that converts between the HTTP/file contract (api_schemas) and the domain (simcore).

Documents in: `to_scenario` (a request -> the domain's Scenario, through `to_cluster` (service/convert_cluster.py,
the cluster section's own conversion) and the model presets),
`request_error` (a domain SpecError -> the document's RequestError, naming the same field). Documents out:
`to_response` (an Outcome -> the result JSON), `presets` (the catalogs), `chrome_trace`. Everything simcore is
taken from its public face (`import simcore`); nothing here reaches into topology/.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from api_schemas import RequestError, SimulationRequest, TrainingIn
from service.convert_cluster import to_cluster
from service.provenance import package_version
from simcore import (
    GB,
    GIB,
    GPUS,
    MODEL_PRESET_SOURCES,
    MODEL_PRESETS,
    NODE_PRESET_NOTES,
    NODE_PRESETS,
    AttentionBackend,
    Checkpointing,
    CollectiveAlgorithm,
    CpComm,
    ElementwiseKernels,
    Failures,
    Fidelity,
    Fp8Recipe,
    Fp8Scaling,
    GpuSpec,
    GradReduce,
    Layout,
    Metrics,
    Outcome,
    Partition,
    Precision,
    Recompute,
    RunTotals,
    Scenario,
    Schedule,
    SpecError,
    StageMemory,
    StageReport,
    TrainingPlan,
    TrainingRun,
    ZeroImplementation,
    ceiling_basis,
    ceiling_fraction,
    chrome_trace,
    default_grad_reduce,
    model_from_fields,
)
from simcore.calibration.mlperf_rcps import mlperf_benchmark

if TYPE_CHECKING:  # imported where used: a plain simulation needs neither the search documents nor the space
    from api_schemas.search import SearchSpaceIn
    from simcore.planning.space import Space
__all__ = ["chrome_trace", "model_fields", "presets",
           "replace_spans", "request_error", "to_cluster", "to_response", "to_scenario",
           "to_training", "training_json", "layout_json", "to_space"]


def request_error(err: SpecError | RequestError) -> RequestError:
    """The request error a document's reader sees: a rule the domain enforces (dp * tp * pp = GPUs, an unknown
    preset) names the same field as the document's own rules do."""
    return err if isinstance(err, RequestError) else RequestError.for_field(err.field, err.rule)


def model_fields(request: SimulationRequest) -> dict[str, Any]:
    """The request's model as fields: its preset's (or its config.json's) with the request's own on top."""
    return _model_fields(request)


def _model_fields(request: SimulationRequest) -> dict[str, Any]:
    given = request.model.model_dump(exclude_none=True)
    name = given.pop("preset", None)
    fields: dict[str, Any] = {}
    hf_config = given.pop("hf_config", None)
    if hf_config is not None:
        if name is not None:
            raise SpecError("model.hf_config", "give a preset or a config.json, not both")
        from interop import model_from_hf

        imported = model_from_hf(hf_config)
        fields.update(imported.assumed)
        fields.update(imported.fields)
    if name is not None:
        if name not in MODEL_PRESETS:
            raise SpecError("model.preset", f"unknown model preset '{name}' (see `clustersim presets models`)")
        fields.update(MODEL_PRESETS[name])
        _drop_stale_defaults(fields, given)
    fields.update(given)
    return fields


def _drop_stale_defaults(preset: dict[str, Any], given: dict[str, Any]) -> None:
    """A preset field that only restates a default derived from other fields (kv heads = heads, head_dim =
    hidden / heads, ffn = 4 x hidden) follows those fields when the request overrides them."""
    heads, hidden = preset.get("num_attention_heads"), preset.get("hidden_size")
    if "num_attention_heads" in given and "num_kv_heads" not in given and preset.get("num_kv_heads") == heads:
        preset.pop("num_kv_heads", None)
    if ({"num_attention_heads", "hidden_size"} & given.keys() and "head_dim" not in given and heads and hidden
            and preset.get("head_dim") == hidden // heads):
        preset.pop("head_dim", None)
    ffn = preset.get("ffn_hidden_size")
    if "hidden_size" in given and "ffn_hidden_size" not in given and hidden and ffn == 4 * hidden:
        preset.pop("ffn_hidden_size", None)
    # The activation and gated_mlp say the same thing twice: a request that gives one drops the preset's other.
    if "activation" in given and "gated_mlp" not in given:
        preset.pop("gated_mlp", None)
    if "gated_mlp" in given and "activation" not in given:
        preset.pop("activation", None)


def to_scenario(request: SimulationRequest, free_communication: bool = False) -> Scenario:
    """Request -> domain scenario; raises SpecError naming the field for anything the domain rejects."""
    lay = request.layout
    layout = Layout(
        dp=lay.dp, tp=lay.tp, pp=lay.pp, microbatch_size=lay.microbatch_size,
        global_batch_size=lay.global_batch_size, virtual_stages=lay.virtual_stages,
        schedule=Schedule(lay.schedule), sequence_parallel=lay.sequence_parallel, zero_stage=lay.zero_stage,
        recompute=Recompute(lay.recompute), overlap_grad_reduce=lay.overlap_grad_reduce, placement=lay.placement,
        tp_comm_overlap=lay.tp_comm_overlap, precision=Precision(lay.precision),
        async_tensor_model_parallel_allreduce=lay.async_tensor_model_parallel_allreduce,
        pipeline_partition=Partition(lay.pipeline_partition) if lay.pipeline_partition else None,
        encoder_pipeline_stages=lay.encoder_pipeline_stages,
        zero3_gather_bucket_elements=lay.zero3_gather_bucket_elements, grad_bucket_elements=lay.grad_bucket_elements,
        zero_implementation=ZeroImplementation(lay.zero_implementation),
        fp8_recipe=Fp8Recipe(lay.fp8_recipe) if lay.fp8_recipe else None,
        fp8_scaling=Fp8Scaling(lay.fp8_scaling) if lay.fp8_scaling else None,
        cp=lay.cp, cp_comm=CpComm(lay.cp_comm),
        ep=lay.ep, expert_tp=lay.expert_tp,
        stage_layers=tuple(lay.stage_layers) if lay.stage_layers is not None else None,
        optimizer_post_validation=lay.optimizer_post_validation,
        elementwise_kernels=ElementwiseKernels(lay.elementwise_kernels) if lay.elementwise_kernels else None,
        attention_backend=AttentionBackend(lay.attention_backend),
        grad_reduce_dtype=_grad_reduce(lay.grad_reduce_dtype, lay.precision, lay.zero_implementation),
        fp8_param_gather=lay.fp8_param_gather, fp8_attention=lay.fp8_attention, fp8_params=lay.fp8_params,
        fp8_weight_cache=lay.fp8_weight_cache,
        bf16_layers=(lay.bf16_layers.first, lay.bf16_layers.last) if lay.bf16_layers else (0, 0),
        zero_quantized_weights=lay.zero_quantized_weights, zero_hpz_partition_size=lay.zero_hpz_partition_size,
        zero_quantized_gradients=lay.zero_quantized_gradients, zero_shard_size=lay.zero_shard_size,
    )
    opts = request.options
    return Scenario(
        model=model_from_fields(_model_fields(request)),
        cluster=to_cluster(request),
        layout=layout,
        fidelity=Fidelity(opts.fidelity),
        algorithm=CollectiveAlgorithm(opts.collective_algorithm),
        keep_spans=opts.trace,
        free_communication=free_communication,
        seed=opts.seed,
        extrapolate=opts.extrapolate,
        training=to_training(request.training) if request.training is not None else None,
    )


def _grad_reduce(given: str | None, precision: str, implementation: str) -> GradReduce | None:
    """The layout's gradient-reduction dtype; None where it is the default (the same scenario either way)."""
    if given is None or given == default_grad_reduce(precision, implementation):
        return None
    return GradReduce(given)


def to_training(doc: TrainingIn) -> TrainingRun:
    """The request's `training` section -> the domain's whole run (hours and GB/s to seconds and bytes/s)."""
    ckpt = fail = None
    if doc.checkpoint is not None:
        c = doc.checkpoint
        ckpt = Checkpointing(
            interval_s=None if c.interval_s == "auto" else float(c.interval_s),
            write_bytes_per_s_per_node=None if c.write_gb_per_s_per_node is None else c.write_gb_per_s_per_node * GB,
            write_s=c.write_s)
    if doc.failures is not None:
        f = doc.failures
        fail = Failures(restart_s=f.restart_s,
                        mtbf_s_per_gpu=None if f.mtbf_hours_per_gpu is None else f.mtbf_hours_per_gpu * 3600.0,
                        mtbf_s_per_node=None if f.mtbf_hours_per_node is None else f.mtbf_hours_per_node * 3600.0)
    mlperf = None if doc.mlperf is None else mlperf_benchmark(doc.mlperf.benchmark, doc.mlperf.version)
    return TrainingRun(tokens=doc.tokens, tokens_per_parameter=doc.tokens_per_parameter,
                       gpu_hour_usd=doc.gpu_hour_usd, gpu_power_w=doc.gpu_power_w, pue=doc.pue,
                       checkpoint=ckpt, failures=fail, mlperf=mlperf)


def training_json(plan: TrainingPlan) -> dict[str, Any]:
    def totals(t: RunTotals) -> dict[str, Any]:
        out: dict[str, Any] = {"days": t.days, "gpu_hours": t.gpu_hours, "cost_usd": t.cost_usd,
                               "energy_mwh": t.energy_mwh}
        return {key: value for key, value in out.items() if value is not None}

    body: dict[str, Any] = {
        "tokens": plan.tokens, "iterations": plan.iterations,
        "without_failures": totals(plan.without_failures), "with_failures": totals(plan.with_failures),
        "checkpoint_size_gb": plan.checkpoint_bytes / GB,
        "checkpoint_write_s": plan.checkpoint_write_s, "checkpoint_interval_s": plan.checkpoint_interval_s,
        "young_interval_s": plan.young_interval_s, "daly_interval_s": plan.daly_interval_s,
        "job_mtbf_hours": None if plan.job_mtbf_s is None else plan.job_mtbf_s / 3600.0,
        "expected_interruptions": plan.expected_interruptions,
        "checkpoint_overhead_days": plan.checkpoint_overhead_s / 86_400.0,
        "lost_work_days": plan.lost_work_s / 86_400.0,
        "lost_work_per_failure_s": plan.lost_work_per_failure_s,
        "goodput": plan.goodput,
        "mlperf": None if plan.mlperf is None else {
            "benchmark": plan.mlperf.benchmark, "version": plan.mlperf.version,
            "time_to_train_min": plan.mlperf.time_to_train_min, "steps": plan.mlperf.steps,
            "evaluations": plan.mlperf.evaluations, "step_time_s": plan.mlperf.step_time_s,
            "eval_time_s": plan.mlperf.eval_time_s, "samples": plan.mlperf.samples,
            "rcp_interpolated": plan.mlperf.rcp_interpolated},
    }
    return {key: value for key, value in body.items() if value is not None}


def replace_spans(scenario: Scenario) -> Scenario:
    """The same scenario, recording spans for a trace."""
    return replace(scenario, keep_spans=True)


def presets(kind: str | None) -> dict[str, Any]:
    """Preset catalogs for `clustersim presets` and GET /v1/presets/{kind}."""
    out: dict[str, Any] = {}
    if kind in (None, "models"):
        out["models"] = {name: {**fields, "source": MODEL_PRESET_SOURCES[name]}
                         for name, fields in MODEL_PRESETS.items()}
    if kind in (None, "clusters"):
        out["clusters"] = {
            name: {"gpu": str(s.gpu), "gpus_per_node": s.gpus_per_node,
                   "nvlink_bandwidth_gb_per_s": s.nvlink_bandwidth_bytes_per_s / GB, "nics_per_node": s.nics_per_node,
                   "nic_bandwidth_gbit_per_s": s.nic_bandwidth_bytes_per_s * 8 / GB, "fabric": str(s.fabric),
                   "oversubscription": s.oversubscription, "intra_node_latency_us": s.intra_node_latency_s * 1e6,
                   "inter_node_latency_us": s.inter_node_latency_s * 1e6, "nvlink_domain_gpus": s.domain_gpus,
                   "pcie_only": None if s.pcie is None else {
                       "switches_per_node": s.pcie.switches, "sockets_per_node": s.pcie.sockets,
                       "uplink_gb_per_s": s.pcie.uplink_bandwidth_bytes_per_s / GB,
                       "socket_link_gb_per_s": s.pcie.socket_bandwidth_bytes_per_s / GB},
                   "description": NODE_PRESET_NOTES[name]}
            for name, s in NODE_PRESETS.items()
        }
    if kind in (None, "gpus"):
        out["gpus"] = {
            str(g.kind): {"peak_tflops_bf16": g.peak_flops_per_s / 1e12, "memory_gib": g.hbm_capacity_bytes / GIB,
                          "hbm_bandwidth_gb_per_s": g.hbm_bandwidth_bytes_per_s / GB,
                          "nvlink_bandwidth_gb_per_s": g.nvlink_bandwidth_bytes_per_s / GB,
                          "peak_tflops_fp8": g.peak_fp8_flops_per_s / 1e12,
                          "peak_tflops_fp4": g.peak_fp4_flops_per_s / 1e12, "tdp_w": g.tdp_w,
                          "gemm_ceiling": _gemm_ceiling(g)}
            for g in GPUS.values()
        }
    return out


def _gemm_ceiling(gpu: GpuSpec) -> dict[str, Any]:
    """Per dtype, the best dense GEMM the model lets the GPU run (TFLOP/s, or None) and where it comes from:
    measured, derived from its relatives' measurements, or none (simcore/cost/compute/gemm_ceilings.py)."""
    out: dict[str, Any] = {}
    for dtype, peak in (("bf16", gpu.peak_flops_per_s), ("fp8", gpu.peak_fp8_flops_per_s)):
        fraction = ceiling_fraction(gpu, dtype)
        out[dtype] = {"tflops": None if fraction is None else round(fraction * peak / 1e12, 1),
                      "basis": ceiling_basis(gpu, dtype)}
    return out


def _metrics_json(m: Metrics) -> dict[str, Any]:
    return {
        "iteration_time_s": m.iteration_time_s,
        "samples_per_s": m.samples_per_s,
        "tokens_per_s": m.tokens_per_s,
        "model_flops_per_iteration": m.model_flops_per_iteration,
        "model_tflops_per_gpu": m.model_tflops_per_gpu,
        "mfu": m.mfu,
        "hardware_tflops_per_gpu": m.hardware_tflops_per_gpu,
        "hfu": m.hfu,
        "bubble_fraction": m.bubble_fraction,
        "pipeline_overhead": m.pipeline_overhead,
        "time_breakdown_s": dict(m.time_breakdown_s),
        "communication_s": dict(m.communication_s),
        "communication_bytes": dict(m.communication_bytes),
        "stages": [_stage_json(m, s) for s in m.stages],
        "memory": {"peak_gib_per_gpu": m.peak_stage.memory.total / GIB, "capacity_gib": m.capacity_gib,
                   "fits": m.fits, "breakdown_gib": _breakdown(m.peak_stage.memory)},
    }


def _stage_json(m: Metrics, s: StageReport) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": s.index, "layers": dict(s.layers), "forward_s": s.forward_s, "backward_s": s.backward_s,
        "backward_input_s": s.backward_input_s, "backward_weight_s": s.backward_weight_s, "bubble_s": s.bubble_s,
        "busy_fraction": s.busy_fraction,
        "memory": {"peak_gib_per_gpu": s.memory.total / GIB, "breakdown_gib": _breakdown(s.memory)}}
    if m.stage_gpus:  # a heterogeneous cluster: which GPU runs the stage, and its HBM
        out["gpu"] = m.stage_gpus[s.index]
        out["memory"]["capacity_gib"] = m.stage_capacity_gib[s.index]
    return out


def _breakdown(memory: StageMemory) -> dict[str, float]:
    out = {"weights": memory.weights / GIB, "gradients": memory.gradients / GIB,
           "optimizer_states": memory.optimizer_states / GIB, "activations": memory.activations / GIB,
           "buffers": memory.buffers / GIB}
    if memory.expert_weights:  # a MoE model: the experts' share of the model states, apart
        out.update(expert_weights=memory.expert_weights / GIB, expert_gradients=memory.expert_gradients / GIB,
                   expert_optimizer_states=memory.expert_optimizer_states / GIB)
    return out


def to_response(outcome: Outcome, include_trace: bool = False,
                request: SimulationRequest | None = None) -> dict[str, Any]:
    """Domain outcome -> the contract's result JSON (a plain dict); with the Chrome trace of its spans under
    "trace" when `include_trace` (as the API's result with `options.trace`), and the `request` it simulated,
    defaults written out, under "request" when given."""
    body = _metrics_json(outcome.metrics)
    body["warnings"] = list(outcome.warnings)
    body["simulator"] = {
        "version": package_version(),
        "events": outcome.events,
        "fidelity": str(outcome.fidelity),
        "simulated_ranks": outcome.simulated_ranks,
        "extrapolated_periods": outcome.extrapolated_periods,
        "wall_time_s": outcome.wall_time_s,
    }
    if include_trace:
        body["trace"] = chrome_trace(outcome.spans)
    if outcome.training is not None:
        body["training"] = training_json(outcome.training)
    if request is not None:
        body["request"] = request.model_dump(mode="json", exclude_none=True)
    return body


def to_space(space: SearchSpaceIn) -> Space:
    """The request's space as the domain's."""
    from simcore.planning.space import Space

    def ints(values: list[int] | None) -> tuple[int, ...] | None:
        return tuple(values) if values is not None else None

    return Space(
        dp=ints(space.dp), tp=ints(space.tp), pp=ints(space.pp), virtual_stages=ints(space.virtual_stages),
        microbatch_size=ints(space.microbatch_size),
        schedule=tuple(Schedule(s) for s in space.schedule) if space.schedule is not None else None,
        zero_stage=tuple(space.zero_stage) if space.zero_stage is not None else None,
        recompute=tuple(Recompute(r) for r in space.recompute) if space.recompute is not None else None,
        sequence_parallel=tuple(space.sequence_parallel) if space.sequence_parallel is not None else None,
        placement=tuple(space.placement) if space.placement is not None else None,
        cp=ints(space.cp), cp_comm=tuple(CpComm(c) for c in space.cp_comm),
        overlap_grad_reduce=tuple(space.overlap_grad_reduce), tp_comm_overlap=tuple(space.tp_comm_overlap),
        async_tensor_model_parallel_allreduce=tuple(space.async_tensor_model_parallel_allreduce),
        precision=tuple(Precision(p) for p in space.precision),
        fp8_recipe=tuple(Fp8Recipe(r) for r in space.fp8_recipe),
        fp8_scaling=tuple(Fp8Scaling(s) for s in space.fp8_scaling),
        max_microbatch_size=space.max_microbatch_size, max_virtual_stages=space.max_virtual_stages,
        min_free_memory_bytes=space.min_free_memory_gib * GIB,
        ep=ints(space.ep), expert_tp=ints(space.expert_tp),
    )


def layout_json(layout: Layout) -> dict[str, Any]:
    """A layout as the request's `layout` section (paste it into a simulation request)."""
    return {
        "dp": layout.dp, "tp": layout.tp, "pp": layout.pp, "virtual_stages": layout.virtual_stages,
        "microbatch_size": layout.microbatch_size, "global_batch_size": layout.global_batch_size,
        "schedule": str(layout.schedule), "sequence_parallel": layout.sequence_parallel,
        "zero_stage": layout.zero_stage, "recompute": str(layout.recompute),
        "overlap_grad_reduce": layout.overlap_grad_reduce, "placement": layout.placement,
        "tp_comm_overlap": layout.tp_comm_overlap, "precision": str(layout.precision),
        **({"fp8_recipe": str(layout.fp8_recipe)} if layout.fp8_recipe else {}),
        **({"fp8_scaling": str(layout.fp8_scaling)} if layout.fp8_scaling else {}),
        **({"async_tensor_model_parallel_allreduce": True} if layout.async_tensor_model_parallel_allreduce else {}),
        **({"cp": layout.cp, "cp_comm": str(layout.cp_comm)} if layout.cp > 1 else {}),
        **({"pipeline_partition": str(layout.pipeline_partition)} if layout.pipeline_partition else {}),
        **({"encoder_pipeline_stages": layout.encoder_pipeline_stages} if layout.encoder_pipeline_stages else {}),
        **({"zero3_gather_bucket_elements": layout.zero3_gather_bucket_elements}
           if layout.zero3_gather_bucket_elements else {}),
        **({"zero_implementation": str(layout.zero_implementation)}
           if layout.zero_implementation is not ZeroImplementation.MEGATRON else {}),
        **({"ep": layout.ep} if layout.ep > 1 else {}),
        **({"expert_tp": layout.expert_tp} if layout.expert_tp > 1 else {}),
        **({"stage_layers": list(layout.stage_layers)} if layout.stage_layers else {}),
        **({"optimizer_post_validation": True} if layout.optimizer_post_validation else {}),
        **({"elementwise_kernels": str(layout.elementwise_kernels)} if layout.elementwise_kernels else {}),
        **({"attention_backend": str(layout.attention_backend)}
           if layout.attention_backend is not AttentionBackend.FUSED else {}),
        **({"grad_reduce_dtype": str(layout.grad_reduce_dtype)} if layout.grad_reduce_dtype else {}),
        **({"fp8_param_gather": True} if layout.fp8_param_gather else {}),
        **({"fp8_attention": True} if layout.fp8_attention else {}),
        **({"fp8_params": True} if layout.fp8_params else {}),
        **({"fp8_weight_cache": False} if not layout.fp8_weight_cache else {}),
        **({"bf16_layers": dict(zip(("first", "last"), layout.bf16_layers))} if any(layout.bf16_layers) else {}),
        **({"zero_quantized_weights": True} if layout.zero_quantized_weights else {}),
        **({"zero_hpz_partition_size": layout.zero_hpz_partition_size} if layout.zero_hpz_partition_size > 1 else {}),
        **({"zero_quantized_gradients": True} if layout.zero_quantized_gradients else {}),
        **({"zero_shard_size": layout.zero_shard_size} if layout.zero_shard_size is not None else {}),
    }
