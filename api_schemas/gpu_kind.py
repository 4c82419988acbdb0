"""The catalog GPU kinds a request names (cluster.gpu, node_groups[].gpu, cluster.measured.gemm.gpu)."""

from __future__ import annotations

from typing import Literal

__all__ = ["GpuKindName"]

GpuKindName = Literal["v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "b200-180gb",
                      "gb200-186gb", "b300-288gb", "gb300-288gb", "l40s-48gb"]
