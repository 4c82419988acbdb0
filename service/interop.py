"""Import and export, the one code path the CLI (`clustersim import`, `export`, `search --export`), the Python API
and the HTTP routes share: a framework's configuration text -> a validated request document (with what was left
out), and a request -> the framework's launch configuration; and `clustersim calibrate`: nccl-tests outputs and a
GEMM sweep -> a `cluster.measured` overlay. The mappings themselves live in interop/."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the CLI's parser reads the kinds below without loading the documents
    from api_schemas import SimulationRequest

__all__ = ["EXPORT_KINDS", "IMPORT_KINDS", "ImportResult", "best_request", "calibrate", "export_config",
           "import_config", "request_to_export"]

IMPORT_KINDS = ("megatron", "torchtitan", "deepspeed", "hf")
EXPORT_KINDS = ("megatron", "torchtitan", "deepspeed")
DEFAULT_CLUSTER = "dgx-h100"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """A request document `clustersim simulate` runs unchanged, the input's keys it could not represent (with their
    values) and the values it assumed where the input said nothing."""

    request: dict[str, Any]
    ignored: dict[str, Any] = field(default_factory=dict)
    assumed: dict[str, Any] = field(default_factory=dict)


def _gpus_per_node(preset: str) -> int:
    from api_schemas import RequestError
    from simcore import NODE_PRESETS

    if preset not in NODE_PRESETS:
        raise RequestError.for_field("cluster", f"unknown cluster preset '{preset}' (see `clustersim presets "
                                     "clusters`)")
    return NODE_PRESETS[preset].gpus_per_node


def _checked(request: dict[str, Any]) -> dict[str, Any]:
    """The request validated as `simulate` would (fields and the domain's rules), so an import that cannot run
    fails here, naming the field."""
    from pydantic import ValidationError

    from api_schemas import SimulationRequest
    from api_schemas.errors import from_validation_error
    from service import convert
    from simcore import SpecError, check

    try:
        document = SimulationRequest.model_validate(request)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    try:
        check(convert.to_scenario(document))
    except SpecError as err:
        raise convert.request_error(err) from None
    return request


def _agree(flag: Any, config: Any, field: str, key: str) -> None:
    from api_schemas import RequestError

    if flag is not None and flag != config:
        raise RequestError.for_field(field, f"says {flag} where the config's {key} says {config}")


def import_config(kind: str, text: str, source: str = "<input>", *, cluster: str = DEFAULT_CLUSTER,
                  nodes: int | None = None, layout: dict[str, Any] | None = None,
                  model: str | dict[str, Any] | None = None) -> ImportResult:
    """`kind` (megatron, torchtitan, deepspeed or hf) `text` -> ImportResult; RequestError naming the line or key
    otherwise. A config.json holds no layout: `layout` (default one GPU per data-parallel rank over the cluster)
    goes beside it; a ds_config.json (deepspeed) holds no model: `model` names its preset, or is a request's model
    section (data parallelism over the cluster, or the degrees its launch script gives)."""
    from api_schemas import RequestError

    if kind == "megatron":
        from interop.megatron_args import parse_megatron
        from interop.megatron_import import request_from_megatron

        imported = request_from_megatron(parse_megatron(text, source), cluster_preset=cluster,
                                         gpus_per_node=_gpus_per_node(cluster), num_nodes=nodes, source=source)
        return ImportResult(_checked(imported.request), imported.ignored, imported.assumed)
    if kind == "torchtitan":
        from interop.torchtitan import request_from_torchtitan

        per_node = _gpus_per_node(cluster)
        request, skipped = request_from_torchtitan(text, cluster_preset=cluster, num_nodes=nodes, source=source,
                                                   gpus=nodes * per_node if nodes is not None else None)
        return ImportResult(_checked(request), skipped)
    if kind == "deepspeed":  # the layout of a config (and of its launch command); the model comes from `model`
        from interop.deepspeed import layout_from_deepspeed, read_launch

        if model is None:
            raise RequestError.for_field("model", "a ds_config.json holds no model: give a model preset (--model)")
        config, launch = read_launch(text, source)
        per_node = _gpus_per_node(cluster)
        size: dict[str, int] = {"num_nodes": nodes or 1}
        degrees = {"tp": 1, "pp": 1}
        ignored: dict[str, Any] = {}
        if launch is not None:
            degrees.update(launch.layout)
            ignored.update({f"launch.{k}": v for k, v in launch.ignored.items()})
            if nodes is None and launch.num_nodes is not None:
                size = {"num_nodes": launch.num_nodes}
            if launch.gpus_per_node is not None and launch.gpus_per_node != per_node and size["num_nodes"] == 1:
                size = {"num_gpus": launch.gpus_per_node}  # part of one node
        gpus = size.get("num_gpus") or size["num_nodes"] * per_node
        if gpus % (degrees["tp"] * degrees["pp"]):
            raise RequestError.for_field(f"{source}.--tensor-model-parallel-size", f"tp x pp = "
                                         f"{degrees['tp'] * degrees['pp']} must divide the {gpus} GPUs")
        dp = gpus // (degrees["tp"] * degrees["pp"])
        fields, config_ignored = layout_from_deepspeed(config, dp=dp, source=source)
        if launch is not None:
            _agree(launch.zero_stage, fields["zero_stage"], f"{source}.--zero-stage", "zero_optimization.stage")
            _agree(launch.precision, fields["precision"], f"{source}.--{launch.precision}", "fp16/bf16.enabled")
            _agree(launch.microbatch_size, fields["microbatch_size"], f"{source}.--micro-batch-size",
                   "train_micro_batch_size_per_gpu")
            _agree(launch.global_batch_size, fields["global_batch_size"], f"{source}.--global-batch-size",
                   "train_batch_size")
        request = {"model": {"preset": model} if isinstance(model, str) else dict(model),
                   "cluster": {"preset": cluster, **size},
                   "layout": {"dp": dp, **degrees, **fields}}
        return ImportResult(_checked(request), {**config_ignored, **ignored})
    if kind == "hf":
        import json

        from interop import model_from_hf

        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RequestError.for_field(f"{source}:{exc.lineno}", f"is not JSON ({exc.msg})") from None
        hf = model_from_hf(config, where=source)
        gpus = (nodes or 1) * _gpus_per_node(cluster)
        request = {"model": {**hf.assumed, **hf.fields}, "cluster": {"preset": cluster, "num_nodes": nodes or 1},
                   "layout": layout or {"dp": gpus, "tp": 1, "pp": 1, "global_batch_size": gpus}}
        return ImportResult(request, hf.ignored, hf.assumed)
    raise RequestError.for_field("kind", f"must be one of {', '.join(IMPORT_KINDS)} (given {kind!r})")


def _deepspeed_buckets(request: SimulationRequest, dp: int) -> dict[str, int]:
    """The zero_optimization sizes the simulation uses, as DeepSpeed's keys: ZeRO 3 (zero_implementation deepspeed
    or deepspeed_2021) DeepSpeed's own defaults as simcore/cost/sharding.py models them; ZeRO 1 and 2 with the
    reduction overlapped, the bucket the simulated reduction runs in (simcore/engine/data_parallel/dp_sync.py)."""
    from simcore import ZeroImplementation
    from simcore.cost.comm.grad_buckets import bucket_elements
    from simcore.cost.sharding import policy

    lay = request.layout
    if lay.zero_stage == 3:
        found = policy(ZeroImplementation(lay.zero_implementation))
        if found is None:
            return {}
        return {"reduce_bucket_size": found.reduce_bucket_elements,
                "stage3_prefetch_bucket_size": found.prefetch_elements,
                "stage3_param_persistence_threshold": found.persistence_threshold,
                "stage3_max_reuse_distance": found.reuse_distance_elements}
    if lay.zero_stage in (1, 2) and lay.overlap_grad_reduce:
        return {"reduce_bucket_size": bucket_elements(dp)}
    return {}


def export_config(kind: str, request: SimulationRequest) -> str:
    """The launch configuration of `request`'s layout for `kind` (megatron: the torchrun command; torchtitan: the
    job TOML; deepspeed: a script writing ds_config.json and starting Megatron-DeepSpeed); RequestError naming the
    field a framework cannot run, and which framework can."""
    from api_schemas import RequestError
    from service import convert

    scenario = convert.to_scenario(request)
    model = convert.model_fields(request)
    if kind == "megatron":
        from interop.megatron_export import megatron_command

        return megatron_command(request, model, num_gpus=scenario.cluster.num_gpus,
                                gpus_per_node=scenario.cluster.gpus_per_node)
    if kind == "torchtitan":
        from interop.torchtitan import torchtitan_toml

        return torchtitan_toml(request)
    if kind == "deepspeed":
        from interop.deepspeed_export import deepspeed_launch

        return deepspeed_launch(request, model, num_gpus=scenario.cluster.num_gpus,
                                gpus_per_node=scenario.cluster.gpus_per_node,
                                buckets=_deepspeed_buckets(request, request.layout.dp))
    raise RequestError.for_field("kind", f"must be one of {', '.join(EXPORT_KINDS)} (given {kind!r})")


def _layout_request(model: dict[str, Any], cluster: dict[str, Any], entry: dict[str, Any]) -> SimulationRequest:
    """A search's model and cluster (sized as the ranked entry's) with the entry's layout."""
    from api_schemas import SimulationRequest

    cluster = {k: v for k, v in cluster.items() if k not in ("num_nodes", "num_gpus")}
    cluster["num_gpus"] = entry["num_gpus"]
    return SimulationRequest.model_validate({"model": model, "cluster": cluster, "layout": entry["layout"]})


def best_request(search: Any, result: dict[str, Any]) -> SimulationRequest:
    """The simulation request of a search's best layout: the search's model and cluster (sized as the best
    layout's), the layout it found. RequestError when the search found none."""
    from api_schemas import RequestError

    best = result.get("best")
    if not best:
        raise RequestError.for_field("search", "found no layout to export")
    return _layout_request(search.model.model_dump(exclude_none=True), search.cluster.model_dump(exclude_none=True),
                           best)


def request_to_export(path: str, rank: int | None = None) -> SimulationRequest:
    """The simulation request a file holds for `export`: a request file as it is; a saved search result (`search
    --json`) its `rank`-th layout (default 1, the best) with the search's model and cluster, which the result echoes
    as `problem.request`; a saved simulation result (`simulate`'s output) the request it echoes as `request`."""
    import json

    from api_schemas import RequestError, load_request_file
    from api_schemas.loading import read_request_text

    try:
        data = json.loads(read_request_text(path))
    except json.JSONDecodeError:
        data = None  # YAML: a request
    if isinstance(data, dict) and "iteration_time_s" in data and "layout" not in data:
        if rank is not None:
            raise RequestError.for_field("--rank", "applies to a saved search result only")
        echoed = data.get("request")
        if not isinstance(echoed, dict):
            raise RequestError.for_field(f"{path}.request", "is missing: this simulation result was saved before "
                                         "results echoed their request; export the request file that was simulated, "
                                         "or simulate it again")
        from pydantic import ValidationError

        from api_schemas import SimulationRequest
        from api_schemas.errors import from_validation_error

        try:
            return SimulationRequest.model_validate(echoed)
        except ValidationError as exc:
            raise from_validation_error(exc) from None
    if not (isinstance(data, dict) and "top" in data and "problem" in data):
        if rank is not None:
            raise RequestError.for_field("--rank", "applies to a saved search result only")
        return load_request_file(path)
    echoed = data["problem"].get("request") if isinstance(data["problem"], dict) else None
    if not isinstance(echoed, dict) or not {"model", "cluster"} <= echoed.keys():
        raise RequestError.for_field(f"{path}.problem.request", "is missing: this search result was saved before "
                                     "results echoed the search's model and cluster; search again, or use "
                                     "`clustersim search FILE --export KIND`")
    top = data["top"] if isinstance(data["top"], list) else []
    if not top:
        raise RequestError.for_field(f"{path}.top", "the search found no layout to export")
    rank = 1 if rank is None else rank
    if not 1 <= rank <= len(top):
        raise RequestError.for_field("--rank", f"must be between 1 and {len(top)}, the layouts the result holds "
                                     f"(given {rank})")
    return _layout_request(echoed["model"], echoed["cluster"], top[rank - 1])


# What the simulator does with each collective's table (simcore/cost/comm/measured_collectives.py): the collectives'
# time at each size, or the transfers' bandwidth at the largest size.
_APPLIED = ("all_reduce", "all_gather", "reduce_scatter")
_BANDWIDTH = {"sendrecv": "point-to-point sends (pipeline stages, context-parallel ring steps)",
              "alltoall": "MoE's all-to-all"}


def _extrapolation(tables: list[dict[str, Any]], gemm: dict[str, Any] | None) -> list[str]:
    """Where the simulator extrapolates from the overlay, in words (its `extrapolation` notes). A table's scope (one
    NVLink domain, or several) is read on the simulated cluster, its hosts laid over the cluster's (on DGX nodes a
    host is a domain; a GB200 NVL72 rack is one domain of 18 hosts): simcore/cost/comm/measured_collectives.py."""
    notes = []
    for t in tables:
        sizes = [p["size_bytes"] for p in t["points"]]
        hosts = "1 host" if t["nodes"] == 1 else f"{t['nodes']} hosts"
        if t["collective"] in _BANDWIDTH:
            notes.append(f"{t['collective']} on {t['ranks']} ranks over {hosts}: the bandwidth measured at "
                         f"{sizes[-1]} bytes scales the model's for {_BANDWIDTH[t['collective']]} in its scope "
                         "(within one NVLink domain, or across domains, as its hosts lie on the cluster), at every "
                         "size (latency: the model's)")
            continue
        notes.append(f"{t['collective']} on {t['ranks']} ranks over {hosts}: measured from {sizes[0]} to {sizes[-1]} "
                     f"bytes; smaller and larger messages take the model's curve scaled by the measured ratio at "
                     f"{sizes[0]} and {sizes[-1]} bytes; groups of other ranks, hosts or NVLink domains in its scope "
                     "take the nearest table's ratio (the simulation's warnings say where)")
    for kind in (*_APPLIED, *_BANDWIDTH):
        have = {t["nodes"] == 1 for t in tables if t["collective"] == kind}
        for one, scope in ((True, "on one host"), (False, "over several hosts")):
            if have and one not in have:
                notes.append(f"{kind} {scope}: not measured; where no table's scope covers a group, the model's "
                             "figures")
    if gemm is not None:
        for dtype in sorted({p["dtype"] for p in gemm["points"]}):
            rows = [p for p in gemm["points"] if p["dtype"] == dtype]
            box = ", ".join(f"{d} {min(p[d] for p in rows)}-{max(p[d] for p in rows)}" for d in ("m", "n", "k"))
            notes.append(f"GEMM {dtype}: {len(rows)} shapes ({box}); other shapes take the model's time scaled by "
                         "the nearest measured shape's ratio (outside that box an extrapolation)")
    return notes


def calibrate(nccl_tests: list[tuple[str, str]], gemm: tuple[str, str] | None = None,
              gemm_gpu: str | None = None) -> dict[str, Any]:
    """nccl-tests outputs [(text, source)] and a GEMM sweep (text, source) -> a `cluster.measured` overlay,
    validated as a request's (RequestError naming the file and line, or the field, otherwise). `gemm_gpu` names the
    catalog GPU the sweep ran on (`gemm.gpu`: what a cluster of node groups needs to know where it applies)."""
    from pydantic import ValidationError

    from api_schemas import RequestError
    from api_schemas.errors import from_validation_error
    from api_schemas.measured import MeasuredIn
    from interop.gemm_sweep import parse_gemm_sweep
    from interop.nccl_tests import parse_nccl_tests
    from service import convert
    from service.convert_cluster import to_measured
    from simcore import SpecError

    if not nccl_tests and gemm is None:
        raise RequestError.for_field("files", "give one nccl-tests output or more, or a GEMM sweep")
    tables = [parse_nccl_tests(text, source) for text, source in nccl_tests]
    sweep = parse_gemm_sweep(*gemm) if gemm is not None else None
    if gemm_gpu is not None:
        if sweep is None:
            raise RequestError.for_field("gemm_gpu", "names the GPU of a GEMM sweep: give the sweep too")
        sweep = {"gpu": gemm_gpu, **sweep}
    overlay: dict[str, Any] = {"collectives": tables}
    if sweep is not None:
        overlay["gemm"] = sweep
    overlay["extrapolation"] = _extrapolation(tables, sweep)
    try:
        to_measured(MeasuredIn.model_validate(overlay)).validate()
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    except SpecError as err:
        raise convert.request_error(err) from None
    return overlay
