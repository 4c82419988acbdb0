"""The comparison documents (contract: CLI `compare`, POST /v1/comparisons).

A comparison request is up to MAX_REQUESTS simulation requests, each a whole request document, with optional
labels (one per request, distinct); the answer is one row of headline figures per request, in the order given.
A problem inside a request is named by its place in the body: ``requests[1].layout.tp``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, ValidationInfo, field_validator

from api_schemas.errors import WHOLE_REQUEST, FieldError, RequestError, from_validation_error
from api_schemas.loading import Syntax, parse_document
from api_schemas.request import SimulationRequest

__all__ = [
    "MAX_REQUESTS",
    "ComparisonExposed",
    "ComparisonLayout",
    "ComparisonMemory",
    "ComparisonRequest",
    "ComparisonResult",
    "ComparisonRow",
    "comparison_request_from",
    "item_field",
    "parse_comparison_request",
]

MAX_REQUESTS = 16
MAX_LABEL_LENGTH = 100

Label = Annotated[StrictStr, Field(min_length=1, max_length=MAX_LABEL_LENGTH)]


def item_field(index: int, field: str) -> str:
    """The field `field` of the request at `index`, as the comparison names it: ``requests[1].layout.tp``."""
    prefix = f"requests[{index}]"
    return prefix if field in ("", WHOLE_REQUEST) else f"{prefix}.{field}"


class ComparisonRequest(BaseModel):
    """Simulation requests to compare side by side, with optional labels (default: ``requests[i]``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "requests": [
                        {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
                         "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 32}},
                        {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
                         "layout": {"dp": 2, "tp": 2, "pp": 2, "global_batch_size": 32}},
                    ],
                    "labels": ["dp8", "dp2-tp2-pp2"],
                }
            ]
        },
    )

    requests: list[SimulationRequest] = Field(
        min_length=1, max_length=MAX_REQUESTS, description=f"1 to {MAX_REQUESTS} simulation request documents")
    labels: list[Label] | None = Field(
        default=None, description="one distinct label per request, in the same order; default: requests[i]")

    @field_validator("requests", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        # Before the items are validated, so that 0 or 100 requests get one clear rule, not 100 errors.
        if isinstance(value, list) and not 1 <= len(value) <= MAX_REQUESTS:
            raise ValueError(f"must list 1 to {MAX_REQUESTS} requests (got {len(value)})")
        return value

    @field_validator("labels")
    @classmethod
    def _one_distinct_label_per_request(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is None:
            return None
        requests = info.data.get("requests")  # absent when the requests are invalid: their errors say enough
        if requests is not None and len(value) != len(requests):
            raise ValueError(f"must give one label per request ({len(requests)} requests, {len(value)} labels)")
        seen: set[str] = set()
        for label in value:
            if label in seen:
                raise ValueError(f"must be distinct: '{label}' is given twice")
            seen.add(label)
        return value

    def label_list(self) -> list[str]:
        """The labels given, or ``requests[i]`` for each request."""
        return list(self.labels) if self.labels is not None else [item_field(i, "") for i in
                                                                   range(len(self.requests))]


_ITEM = re.compile(r"^(requests|labels)\.(\d+)(?=\.|$)")


def _named_items(err: RequestError) -> RequestError:
    """The same errors with list items named ``requests[1].layout.tp`` and ``labels[0]``."""
    return RequestError(FieldError(_ITEM.sub(r"\1[\2]", d.field), d.rule) for d in err.details)


def comparison_request_from(data: Any) -> ComparisonRequest:
    """Validate a comparison request document; raises RequestError naming each bad field."""
    if not isinstance(data, dict):
        raise RequestError.for_field(WHOLE_REQUEST, "must be a mapping with requests (and optional labels)")
    try:
        return ComparisonRequest.model_validate(data)
    except ValidationError as exc:
        raise _named_items(from_validation_error(exc)) from None


def parse_comparison_request(text: str, source: str = "<request>", syntax: Syntax | None = None) -> ComparisonRequest:
    """Parse one YAML or JSON comparison request (duplicate keys refused, as for a simulation request; `syntax`
    as for parse_document)."""
    try:
        data = parse_document(text, source, syntax)
    except RequestError as err:  # a key given twice: requests.0.model.preset
        raise _named_items(err) from None
    return comparison_request_from(data)


# ---- the answer (for the OpenAPI schema and to check responses) ---------------------------------------------

class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ComparisonLayout(_Out):
    """The request's parallel layout, in short."""

    dp: int
    tp: int
    pp: int
    virtual_stages: int
    microbatch_size: int
    global_batch_size: int
    schedule: str
    zero_stage: int
    recompute: str
    precision: str = Field(default="bf16", description="shown when not bf16")
    fp8_recipe: str | None = Field(default=None, description="shown for fp8")
    fp8_scaling: str | None = Field(default=None, description="shown for fp8 when set",
                                    exclude_if=lambda value: value is None)
    cp: int | None = Field(default=None, description="context parallelism, shown when cp > 1",
                           exclude_if=lambda value: value is None)
    ep: int | None = Field(default=None, description="expert parallelism, shown when ep > 1",
                           exclude_if=lambda value: value is None)


class ComparisonExposed(_Out):
    """Seconds of communication the critical rank's compute stream waited for (time_breakdown_s), by kind."""

    tp: float
    pp: float
    dp: float = Field(description="DP and ZeRO")
    cp: float | None = Field(default=None, description="context parallelism's K/V exchanges, where cp > 1",
                             exclude_if=lambda value: value is None)
    ep: float | None = Field(default=None, description="a mixture of experts' all-to-alls, where it has them",
                             exclude_if=lambda value: value is None)


class ComparisonMemory(_Out):
    """GiB per GPU: the peak stage's peak, the GPU's capacity, and whether it fits."""

    peak_gib_per_gpu: float | None = None
    capacity_gib: float | None = None
    fits: bool | None = None


class ComparisonTraining(_Out):
    days: float = Field(description="wall-clock days of the whole run, checkpoints and failures included")
    gpu_hours: float
    cost_usd: float | None = None
    goodput: float


class ComparisonRow(_Out):
    """One request's headline figures (the full result is what POST /v1/simulations answers)."""

    label: str
    summary: str = Field(description="the layout in one line, e.g. 'DP 2 x TP 2 x PP 2, mb 1, 1f1b, ZeRO 0, "
                         "recompute none'")
    layout: ComparisonLayout
    gpu: str = Field(description="the cluster's GPU, e.g. 'H100 80GB' (node groups' GPUs joined with ' + ')")
    iteration_time_s: float
    tokens_per_s: float
    samples_per_s: float
    mfu: float
    hfu: float
    bubble_fraction: float
    stage_imbalance: float = Field(description="max over pipeline stages of busy time over their mean (1 = "
                                   "balanced, and for one stage)")
    exposed_communication_s: ComparisonExposed
    memory: ComparisonMemory
    warnings: list[str]
    training: ComparisonTraining | None = Field(
        default=None, description="the whole run, where the request has a training section; absent otherwise"
    )


class ComparisonResult(_Out):
    """One row per request, in the order of the request."""

    rows: list[ComparisonRow]
