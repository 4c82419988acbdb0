"""The search and sweep request documents (contract: CLI `search` and `sweep`, POST /v1/searches).

A search request names a model, a cluster and a global batch; `space` narrows (or widens) what is enumerated,
`bounds` says how much to simulate, and `baseline` is an optional layout to compare the winner with. A simulation
request (with a `layout`) is also accepted as a search request: its layout becomes the baseline and its
global_batch_size the batch.

A sweep request is a base simulation request plus a grid: {dotted field path: [values]}; every combination of
the grid's values (the last path varying fastest) is one simulation. A path may name a whole section
(``layout``) or one field (``layout.tp``, ``model.preset``).

Unknown fields are rejected by name, as in the simulation request.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from api_schemas.cluster import NonNegativeFloat
from api_schemas.errors import WHOLE_REQUEST, FieldError, RequestError, from_validation_error
from api_schemas.loading import Syntax, parse_document, read_request_text
from api_schemas.measured import with_measured_file
from api_schemas.request import (
    ClusterIn,
    LayoutIn,
    ModelIn,
    OptionsIn,
    PositiveFloat,
    Samples,
    SimulationRequest,
    Size,
    TrainingIn,
    ZeroStage,
    placement_is_permutation,
)
from api_schemas.topology_file import with_topology_file

__all__ = [
    "SearchBoundsIn",
    "SearchRequest",
    "SearchSpaceIn",
    "SweepRequest",
    "load_search_file",
    "load_sweep_file",
    "parse_search_request",
    "parse_sweep_request",
]

DEFAULT_TOP_K = 5
DEFAULT_MAX_CANDIDATES = 500


def _distinct(values: list[Any] | None) -> list[Any] | None:
    if values is None:
        return None
    out: list[Any] = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


# The most values one list of the search space may hold (a space's size is the product of its lists').
MAX_CHOICES = 64
# A size tried: at most 2^53, as every integer of a request (a larger one is not exact as a JSON number).
SpaceSize = Annotated[StrictInt, Field(ge=1, le=2**53)]


def _choices(description: str | None = None) -> Any:
    """A list of values to try (at least one, at most MAX_CHOICES); None: generated."""
    return Field(default=None, min_length=1, max_length=MAX_CHOICES, description=description)


class SearchSpaceIn(BaseModel):
    """What the search may vary. A list fixes the values tried; a missing field is generated from the model,
    the cluster and the batch (see docs/search.md, "Search and sweeps")."""

    model_config = ConfigDict(extra="forbid")

    dp: list[SpaceSize] | None = _choices()
    tp: list[SpaceSize] | None = _choices("default: the divisors of the GPU count up to the GPUs of a node")
    pp: list[SpaceSize] | None = _choices("default: the divisors of GPUs / tp up to the number of layers")
    virtual_stages: list[SpaceSize] | None = _choices(
        "for interleaved_1f1b; default: 2..max_virtual_stages where pp * v divides the layers")
    microbatch_size: list[SpaceSize] | None = _choices(
        "default: the divisors of global batch / dp up to max_microbatch_size")
    schedule: list[Literal["gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zb_h2", "zb_v", "dualpipe"]] | None = (
        _choices())
    zero_stage: list[ZeroStage] | None = _choices()
    recompute: list[Literal["none", "selective", "full"]] | None = _choices()
    sequence_parallel: list[StrictBool] | None = _choices()
    placement: list[StrictStr] | None = _choices(
        "default: every order that maps ranks differently")
    cp: list[SpaceSize] | None = _choices(
        "context parallelism; default: for a flash-attention model that is not encoder-decoder, the divisors of "
        "GPUs / tp that keep seq_length / (2 cp) whole; else 1")
    cp_comm: list[Literal["p2p", "all_gather", "a2a"]] = Field(
        default=["p2p"], min_length=1, description="how K/V are exchanged, tried where cp > 1")
    overlap_grad_reduce: list[StrictBool] = Field(default=[True], min_length=1)
    tp_comm_overlap: list[StrictBool] = Field(default=[False], min_length=1)
    async_tensor_model_parallel_allreduce: list[StrictBool] = Field(
        default=[False], min_length=1, description="Megatron's asynchronous TP input-gradient all-reduce; tried "
        "where tp > 1")
    precision: list[Literal["bf16", "fp16", "fp8", "mxfp8", "nvfp4"]] = Field(
        default=["bf16"], min_length=1, description="fp8 needs a GPU with FP8 tensor cores (Hopper or later); mxfp8 "
        "and nvfp4 Blackwell's")
    fp8_recipe: list[Literal["tensorwise", "rowwise", "mxfp8", "blockwise"]] = Field(
        default=["tensorwise"], min_length=1, description="the FP8 recipes tried where precision is fp8")
    fp8_scaling: list[Literal["delayed", "current"]] = Field(
        default=["delayed"], min_length=1, description="the scalings tried where the FP8 recipe is tensorwise "
        "(docs/contract-fp8-scaling.md)")
    max_microbatch_size: Annotated[StrictInt, Field(ge=1, le=1024)] = 8
    max_virtual_stages: Annotated[StrictInt, Field(ge=1, le=64)] = 8
    min_free_memory_gib: NonNegativeFloat = Field(
        default=0.0, description="discard layouts that leave less than this free per GPU")
    num_nodes: list[SpaceSize] | None = _choices(
        "cluster sizes to try, in whole nodes of the request's cluster; default: the request's size alone")
    ep: list[SpaceSize] | None = _choices(
        "expert parallelism (MoE); default: every divisor of tp * dp that divides num_experts (1 for a dense model)")
    expert_tp: list[SpaceSize] | None = _choices("the experts' tensor parallelism (MoE); default [1]")

    @field_validator("*", mode="after")
    @classmethod
    def _dedupe(cls, value: Any) -> Any:
        return _distinct(value) if isinstance(value, list) else value

    @field_validator("placement")
    @classmethod
    def _placements(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        out = []
        for item in value:
            try:
                out.append(placement_is_permutation(item))
            except ValueError as err:
                raise ValueError(f"'{item}' {err}") from None
        return _distinct(out)


class SearchBoundsIn(BaseModel):
    """How much to simulate: the CLI's --top, --max-candidates and --time-limit override these."""

    model_config = ConfigDict(extra="forbid")

    top_k: Size = Field(default=DEFAULT_TOP_K, description="layouts returned, fastest first")
    max_candidates: Size | None = Field(
        default=DEFAULT_MAX_CANDIDATES, description="at most this many layouts simulated (the most promising first)")
    exhaustive: StrictBool = Field(
        default=False, description="simulate every feasible layout (up to the other bounds) in the estimate's "
        "order, instead of only those whose bound can still beat the best simulated")
    time_limit_s: PositiveFloat | None = Field(
        default=None, description="stop starting simulations after this many seconds")
    max_estimated_s: PositiveFloat | None = Field(
        default=None, description="simulate candidates, most promising first, while the sum of their estimated "
        "simulation seconds (the baseline's first) stays within this: the same candidates every run, unlike "
        "time_limit_s; a service job sets it from its job time limit")
    max_candidate_events: Size | None = Field(
        default=None, description="screen, not simulate, a candidate whose estimated engine events are over this "
        "(the CLI and the service use the job limit)")
    max_candidate_memory_mb: Size | None = Field(
        default=None, description="screen, not simulate, a candidate whose simulation's estimated peak memory (MiB) "
        "is over this (the CLI and the service use half a simulation process's memory cap)")


class SearchRequest(BaseModel):
    """A layout search: which layout trains this model fastest on this cluster at this global batch."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{
            "model": {"preset": "gpt3-175b"},
            "cluster": {"preset": "dgx-a100", "num_nodes": 128},
            "global_batch_size": 1536,
            "bounds": {"max_candidates": 200},
        }]},
    )

    model: ModelIn
    cluster: ClusterIn
    global_batch_size: Samples
    space: SearchSpaceIn = Field(default_factory=SearchSpaceIn, json_schema_extra={"default": {}})
    bounds: SearchBoundsIn = Field(default_factory=SearchBoundsIn, json_schema_extra={"default": {}})
    baseline: LayoutIn | None = Field(default=None, description="a layout to compare the best with (simulated too)")
    options: OptionsIn = Field(default_factory=OptionsIn, json_schema_extra={"default": {}})
    objective: Literal["time", "cost", "goodput_time"] = Field(
        default="time", description="rank by tokens/s (time), by the whole run's cost (cost), or by its days with "
                                    "failures and checkpoints (goodput_time); cost and goodput_time need `training`")
    training: TrainingIn | None = Field(
        default=None, description="the whole run each candidate is measured on (as in a simulation request)")

    @field_validator("baseline")
    @classmethod
    def _same_batch(cls, value: LayoutIn | None, info: ValidationInfo) -> LayoutIn | None:
        batch = info.data.get("global_batch_size")
        if value is not None and batch is not None and value.global_batch_size != batch:
            raise ValueError(f"global_batch_size ({value.global_batch_size}) must equal the search's ({batch})")
        return value


class SweepRequest(BaseModel):
    """A batch run: every combination of the grid's values applied to the base request."""

    model_config = ConfigDict(extra="forbid")

    base: dict[str, Any] = Field(description="a simulation request (model, cluster, layout, options)")
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = Field(
        min_length=1, description="{dotted field path: [values]}, e.g. {'model.preset': ['gpt3-13b', 'gpt3-175b']}")

    @field_validator("grid")
    @classmethod
    def _known_paths(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for path in grid:
            problem = _path_problem(path)
            if problem:
                raise ValueError(f"'{path}': {problem}")
        return grid

    def points(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """(the grid values of the point, the full request document) for every point, in grid order."""
        paths = list(self.grid)
        for values in itertools.product(*(self.grid[p] for p in paths)):
            point = dict(zip(paths, values))
            doc = copy.deepcopy(self.base)
            for path, value in point.items():
                _set(doc, path, copy.deepcopy(value))
            yield point, doc

    def requests(self) -> list[tuple[dict[str, Any], SimulationRequest]]:
        """Every point validated; raises RequestError naming the grid value or base field that is invalid."""
        out = []
        for index, (point, doc) in enumerate(self.points()):
            try:
                out.append((point, SimulationRequest.model_validate(doc)))
            except ValidationError as exc:
                raise _point_error(exc, index, point) from None
        return out


_SECTIONS: dict[str, type[BaseModel]] = {"model": ModelIn, "cluster": ClusterIn, "layout": LayoutIn,
                                          "options": OptionsIn}


def _path_problem(path: str) -> str | None:
    parts = path.split(".")
    if parts[0] not in _SECTIONS:
        return f"must start with one of {', '.join(_SECTIONS)}"
    if len(parts) > 2:
        return "must be a section or section.field"
    if len(parts) == 2 and parts[1] not in _SECTIONS[parts[0]].model_fields:
        return f"unknown field '{parts[1]}' of {parts[0]}"
    return None


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    section, _, name = path.partition(".")
    if not name:
        doc[section] = value
        return
    target = doc.get(section)
    if not isinstance(target, dict):
        target = doc[section] = {}
    target[name] = value


def _point_error(exc: ValidationError, index: int, point: dict[str, Any]) -> RequestError:
    base = from_validation_error(exc)
    details = []
    for d in base.details:
        owner = next((p for p in point if d.field == p or d.field.startswith(p + ".")), None)
        if owner is not None:
            details.append(FieldError(f"grid.{owner}", f"{d.field}: {d.rule} (grid point {index}: "
                                                       f"{owner} = {point[owner]!r})"))
        else:
            details.append(FieldError(f"base.{d.field}", f"{d.rule} (grid point {index})"))
    return RequestError(details)


def _mapping(text: str, source: str, what: str, syntax: Syntax | None = None) -> dict[str, Any]:
    data = parse_document(text, source, syntax)
    if not isinstance(data, dict):
        raise RequestError.for_field(WHOLE_REQUEST, f"{source} must be a mapping ({what})")
    return data


def parse_search_request(text: str, source: str = "<request>", syntax: Syntax | None = None) -> SearchRequest:
    """Parse a search request (or a simulation request, whose layout becomes the baseline); `syntax` as for
    parse_document."""
    data = _mapping(text, source, "model, cluster and global_batch_size", syntax)
    return search_request_from(data)


def search_request_from(data: dict[str, Any]) -> SearchRequest:
    """Validate a search request document; a simulation request (with `layout`) becomes a search around it."""
    if "layout" in data and "global_batch_size" not in data:
        data = dict(data)
        layout = data.pop("layout")
        data["baseline"] = layout
        if isinstance(layout, dict) and "global_batch_size" in layout:
            data["global_batch_size"] = layout["global_batch_size"]
    try:
        return SearchRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def parse_sweep_request(text: str, source: str = "<request>") -> SweepRequest:
    data = _mapping(text, source, "base and grid")
    try:
        return SweepRequest.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def load_search_file(path: str) -> SearchRequest:
    """A search request file; its `cluster.topology` and `cluster.measured` file paths read as simulation
    requests' are."""
    data = _mapping(read_request_text(path), path, "model, cluster and global_batch_size")
    return search_request_from(with_measured_file(with_topology_file(data, path), path, parse_document))


def load_sweep_file(path: str) -> SweepRequest:
    return parse_sweep_request(read_request_text(path), source=path)
