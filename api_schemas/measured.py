"""The request's `cluster.measured`: the user's own measurements, as `clustersim calibrate` writes them (YAML) and
POST /v1/calibrations/nccl-tests answers them (JSON): nccl-tests tables (time and bus bandwidth by size, per
collective, ranks and nodes) and a GEMM sweep (TFLOP/s by shape and dtype). In a request file (CLI, Python API)
the field may be a file path instead, relative to the request file (`with_measured_file`); over HTTP the overlay
is inline. Units in the names: bytes, microseconds, GB/s (10^9 bytes), TFLOP/s (10^12 FLOP/s)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, model_validator

from api_schemas.beside import read_beside
from api_schemas.gpu_kind import GpuKindName

__all__ = ["MEASURED_FIELD", "CollectivePointIn", "GemmPointIn", "MeasuredCollectiveIn", "MeasuredGemmIn",
           "MeasuredIn", "with_measured_file"]

MEASURED_FIELD = "cluster.measured"
Microseconds = Annotated[StrictFloat, Field(gt=0, le=1e9, allow_inf_nan=False)]
Bandwidth = Annotated[StrictFloat, Field(ge=0, le=1e6, allow_inf_nan=False)]
Dimension = Annotated[StrictInt, Field(ge=1, le=1 << 24)]
Note = Annotated[StrictStr, Field(max_length=1_000)]


class CollectivePointIn(BaseModel):
    """One row of an nccl-tests table."""

    model_config = ConfigDict(extra="forbid")

    size_bytes: Annotated[StrictInt, Field(ge=1, le=1 << 50)] = Field(description="nccl-tests' size: the whole buffer")
    time_us: Microseconds = Field(description="out-of-place time; what the simulator reads")
    busbw_gb_per_s: Bandwidth | None = Field(default=None, description="out-of-place bus bandwidth")
    in_place_time_us: Microseconds | None = None
    in_place_busbw_gb_per_s: Bandwidth | None = None


class MeasuredCollectiveIn(BaseModel):
    """One nccl-tests table: a collective on `ranks` GPUs over `nodes` hosts."""

    model_config = ConfigDict(extra="forbid")

    collective: Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    ranks: Annotated[StrictInt, Field(ge=2, le=1 << 20)]
    nodes: Annotated[StrictInt, Field(ge=1, le=1 << 17)]
    gpu: Note | None = Field(default=None, description="the devices' names from `# Using devices`")
    source: Note | None = Field(default=None, description="the file it was read from")
    # (nccl-tests -b 8 -e 8G -f 2 prints 31 sizes; the limits keep an overlay within a request body)
    points: list[CollectivePointIn] = Field(min_length=1, max_length=512)

    @model_validator(mode="after")
    def _ascending(self) -> MeasuredCollectiveIn:
        if self.ranks % self.nodes:
            raise ValueError(f"ranks ({self.ranks}) must be a multiple of nodes ({self.nodes}): equal GPUs per node")
        sizes = [p.size_bytes for p in self.points]
        if any(b <= a for a, b in zip(sizes, sizes[1:])):
            raise ValueError("points: size_bytes must be strictly ascending")
        return self


class GemmPointIn(BaseModel):
    """One measured matrix product: m x k by k x n."""

    model_config = ConfigDict(extra="forbid")

    m: Dimension
    n: Dimension
    k: Dimension
    dtype: Literal["bf16", "fp8"] = Field(description="bf16: the 16-bit tensor cores (fp16 too); fp8")
    tflops: Annotated[StrictFloat, Field(gt=0, le=1e5, allow_inf_nan=False)]


class MeasuredGemmIn(BaseModel):
    """A GEMM sweep."""

    model_config = ConfigDict(extra="forbid")

    gpu: GpuKindName | None = Field(
        default=None, description="the GPU it ran on: required with node_groups of several GPUs, where the sweep "
        "applies to the groups of that GPU (the others keep the model's GEMM times); default the cluster's GPU")
    source: Note | None = None
    points: list[GemmPointIn] = Field(min_length=1, max_length=512)


class MeasuredIn(BaseModel):
    """The overlay: measured collectives and GEMMs replace the model's where they exist."""

    model_config = ConfigDict(extra="forbid")

    collectives: list[MeasuredCollectiveIn] = Field(default_factory=list, json_schema_extra={"default": []},
                                                     max_length=32)
    gemm: MeasuredGemmIn | None = None
    extrapolation: list[Note] = Field(default_factory=list, json_schema_extra={"default": []}, max_length=64,
                                      description="where the simulator extrapolates from these measurements "
                                                  "(written by `clustersim calibrate`; not read)")

    @model_validator(mode="after")
    def _one_table_per_scope(self) -> MeasuredIn:
        seen: set[tuple[str, int, int]] = set()
        for table in self.collectives:
            key = (table.collective, table.ranks, table.nodes)
            if key in seen:
                raise ValueError(f"collectives: two {table.collective} tables on {table.ranks} ranks over "
                                 f"{table.nodes} nodes: give each scope once")
            seen.add(key)
        return self


def with_measured_file(data: Any, source: str, parse_document: Callable[[str, str], Any]) -> Any:
    """`data` with its `cluster.measured`, when that is a file path, replaced by the file's overlay (YAML or JSON,
    read by `parse_document(text, path)`: api_schemas.loading's, which imports this module). A relative path is
    relative to the request file `source`."""
    cluster = data.get("cluster") if isinstance(data, dict) else None
    where = cluster.get("measured") if isinstance(cluster, dict) else None
    if not isinstance(where, str):
        return data
    path, text = read_beside(where, source, MEASURED_FIELD)
    assert isinstance(cluster, dict)  # (a path was found in it)
    return {**data, "cluster": {**cluster, "measured": parse_document(text, path)}}
