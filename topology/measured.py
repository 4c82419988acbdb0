"""What the user measured on their own cluster (`cluster.measured`, written by `clustersim calibrate`): collective
times by size from nccl-tests, per collective and per scope (ranks over nodes), and GEMM rates by shape and dtype.
Plain data, validated here; the cost model reads it (simcore/cost/comm/measured_collectives.py and measured_gemm.py)
and replaces its own figures where a measurement exists.

Units: sizes in bytes (nccl-tests' `size` column: the whole buffer of the collective), times in seconds (its `time`
column, out of place), GEMM rates in FLOP/s. `nodes` counts the hosts (servers) of nccl-tests' `# Using devices`
header; the cost model lays them over the cluster's hosts and reads the NVLink domains they span (a host is a
domain on DGX nodes; up to 18 hosts of 4 GPUs are one domain on a GB200 NVL72 rack: simcore/cost/
measured_collectives.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.errors import SpecError

__all__ = ["COLLECTIVES", "GEMM_DTYPES", "Measured", "MeasuredCollective", "MeasuredGemm"]

# nccl-tests' five tables this reads (src/all_reduce.cu, all_gather.cu, reduce_scatter.cu, alltoall.cu,
# sendrecv.cu); the cost model applies the first three (the collectives it prices by bus bandwidth).
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
GEMM_DTYPES = ("bf16", "fp8")  # 16-bit (bf16 and fp16 share the 16-bit peak) and FP8 tensor cores


@dataclass(frozen=True, slots=True)
class MeasuredCollective:
    """One nccl-tests table: `collective` on `ranks` GPUs over `nodes` hosts, its time at each size."""

    collective: str
    ranks: int
    nodes: int
    sizes_bytes: tuple[float, ...]  # ascending, > 0
    times_s: tuple[float, ...]  # out-of-place time at each size

    @property
    def within_node(self) -> bool:
        """On one host (which, on a cluster whose NVLink domain spans hosts, is not all that is within a domain)."""
        return self.nodes == 1


@dataclass(frozen=True, slots=True)
class MeasuredGemm:
    """One measured m x k by k x n product: its rate in `dtype` (a GEMM sweep's row)."""

    m: float
    n: float
    k: float
    dtype: str
    flops_per_s: float
    gpu: str | None = None  # the catalog GPU kind the sweep ran on; None: the cluster's GPU (every GPU of it)

    @property
    def seconds(self) -> float:
        return 2.0 * self.m * self.n * self.k / self.flops_per_s


@dataclass(frozen=True, slots=True)
class Measured:
    """The overlay: nccl-tests tables and GEMM sweep rows; empty parts leave the model's figures in place."""

    collectives: tuple[MeasuredCollective, ...] = ()
    gemms: tuple[MeasuredGemm, ...] = ()

    def validate(self) -> Measured:
        """Raise SpecError naming the first entry that breaks a rule; return self."""
        seen: set[tuple[str, int, int]] = set()
        for i, c in enumerate(self.collectives):
            where = f"cluster.measured.collectives[{i}]"
            if c.collective not in COLLECTIVES:
                raise SpecError(f"{where}.collective", f"must be one of {', '.join(COLLECTIVES)}")
            if c.ranks < 2 or c.nodes < 1 or c.ranks % c.nodes:
                raise SpecError(f"{where}.ranks", "must be >= 2 and a multiple of nodes (equal GPUs per node)")
            key = (c.collective, c.ranks, c.nodes)
            if key in seen:
                raise SpecError(f"{where}", f"a second {c.collective} table on {c.ranks} ranks over {c.nodes} "
                                "nodes: give each scope once")
            seen.add(key)
            if not c.sizes_bytes or len(c.sizes_bytes) != len(c.times_s):
                raise SpecError(f"{where}.points", "must give a time for each size, at least one")
            if any(s <= 0 for s in c.sizes_bytes) or any(b <= a for a, b in zip(c.sizes_bytes, c.sizes_bytes[1:])):
                raise SpecError(f"{where}.points", "sizes must be > 0 and strictly ascending")
            if any(t <= 0 for t in c.times_s):
                raise SpecError(f"{where}.points", "times must be > 0")
        for i, g in enumerate(self.gemms):
            if g.dtype not in GEMM_DTYPES:
                raise SpecError(f"cluster.measured.gemm.points[{i}].dtype", f"must be one of {', '.join(GEMM_DTYPES)}")
            if min(g.m, g.n, g.k) < 1 or g.flops_per_s <= 0:
                raise SpecError(f"cluster.measured.gemm.points[{i}]", "m, n, k must be >= 1 and tflops > 0")
        return self
