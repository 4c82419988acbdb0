"""POST /v1/imports/{kind} and POST /v1/exports/{kind}: a framework's configuration in, as a request; a request's
layout out, as the framework's launch configuration. POST /v1/calibrations/nccl-tests: nccl-tests outputs and a
GEMM sweep in, a `cluster.measured` overlay out. The same code as `clustersim import`, `export` and `calibrate`
(service/interop.py)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from api_schemas import RequestError, SimulationRequest
from api_schemas.gpu_kind import GpuKindName
from service.http.context import AUTHORIZED, ServiceDep
from service.http.errors import invalid
from service.http.httpio import read_document
from service.http.openapi import ERROR, body_of

router = APIRouter(tags=["interop"], dependencies=AUTHORIZED)


class ImportIn(BaseModel):
    """A Megatron-LM command line or log (megatron), a job TOML (torchtitan), a ds_config.json or the script
    `clustersim export deepspeed` writes (deepspeed) or a config.json (hf), as text."""

    model_config = ConfigDict(extra="forbid")

    text: StrictStr = Field(max_length=1_000_000)
    cluster: StrictStr = "dgx-h100"
    nodes: StrictInt | None = Field(default=None, ge=1, le=100_000)
    model: StrictStr | None = Field(default=None, description="deepspeed: the model preset")


class ImportOut(BaseModel):
    request: dict[str, Any]
    ignored: dict[str, Any]
    assumed: dict[str, Any]


class ExportOut(BaseModel):
    text: str


class MeasurementFileIn(BaseModel):
    """One benchmark output, as text; `name` (the file's name) stands for it in errors and may name its
    collective (all_reduce.txt)."""

    model_config = ConfigDict(extra="forbid")

    text: StrictStr = Field(max_length=10_000_000)
    name: StrictStr = Field(default="input", max_length=200)


class CalibrationIn(BaseModel):
    """nccl-tests outputs (one run each) and a GEMM sweep (CSV m,n,k,dtype,tflops or MAMF-finder's log)."""

    model_config = ConfigDict(extra="forbid")

    files: list[MeasurementFileIn] = Field(default_factory=list, json_schema_extra={"default": []}, max_length=100)
    gemm: MeasurementFileIn | None = None
    gemm_gpu: GpuKindName | None = Field(default=None, description="the catalog GPU the GEMM sweep ran on")


BODIES: tuple[type[BaseModel], ...] = (ImportIn, CalibrationIn)
"""The request bodies of these routes, for the OpenAPI schema (service/http/openapi.py)."""


# (400: a body that is not JSON at all, which FastAPI refuses before it reaches the model)
@router.post("/v1/imports/{kind}", response_model=ImportOut, responses={400: ERROR, 401: ERROR, 422: ERROR})
async def import_config(kind: Literal["megatron", "torchtitan", "deepspeed", "hf"], body: ImportIn,
                        svc: ServiceDep) -> ImportOut:
    """A request from a framework's configuration; the keys it cannot represent listed in `ignored` with their
    values. 422 naming the line (`input:12`) or the key otherwise."""
    from service.interop import import_config as run

    try:
        result = await svc.off_loop(lambda: run(kind, body.text, "input", cluster=body.cluster, nodes=body.nodes,
                                                           model=body.model))
    except RequestError as err:
        raise invalid(err) from None
    return ImportOut(request=result.request, ignored=result.ignored, assumed=result.assumed)


@router.post("/v1/exports/{kind}", response_model=ExportOut, openapi_extra=body_of(SimulationRequest),
             responses={401: ERROR, 413: ERROR, 415: ERROR, 422: ERROR})
async def export_config(kind: Literal["megatron", "torchtitan", "deepspeed"], request: Request,
                        svc: ServiceDep) -> ExportOut:
    """The launch configuration of a request's layout (JSON or YAML, as POST /v1/simulations reads it; megatron:
    the torchrun command; torchtitan: the job TOML; deepspeed: a script writing ds_config.json, then the
    Megatron-DeepSpeed command). 422 naming the field a framework cannot run, and which framework can."""
    from service import convert
    from service.http.admission import parse_body
    from service.interop import export_config as run
    from simcore import SpecError

    body, syntax = await read_document(request, svc.settings)

    def export() -> str:
        return run(kind, parse_body(body, syntax))

    try:
        return ExportOut(text=await svc.off_loop(export))
    except (RequestError, SpecError) as err:
        raise invalid(convert.request_error(err)) from None


@router.post("/v1/calibrations/nccl-tests", responses={400: ERROR, 401: ERROR, 422: ERROR})
async def calibrate(body: CalibrationIn, svc: ServiceDep) -> dict[str, Any]:
    """A `cluster.measured` overlay (what `clustersim calibrate nccl-tests` writes, as JSON): a simulation request
    carries it inline as `cluster.measured`. 422 naming the file and line (`all_reduce.txt:12`) otherwise."""
    from service.interop import calibrate as run

    files = [(f.text, f.name) for f in body.files]
    gemm = (body.gemm.text, body.gemm.name) if body.gemm is not None else None
    try:
        return await svc.off_loop(run, files, gemm, body.gemm_gpu)
    except RequestError as err:
        raise invalid(err) from None
