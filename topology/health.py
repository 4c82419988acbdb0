"""What is wrong with a cluster: named slow GPUs, degraded links and per-GPU compute variability (the request's
`cluster.slow_gpus`, `cluster.degraded_links`, `cluster.compute_variability`).

A slow GPU's compute takes `compute_time_factor` times as long (1.5: 50% longer; thermal throttling, a bad
HBM stack). A degraded link carries `bandwidth_factor` of its bandwidth, both directions: a node's NIC (its PCIe
link to its GPUs and its cable to the leaf switch) or a GPU's NVLink port. Variability gives every GPU a compute
time factor drawn from a log-normal distribution of mean 1 and the given coefficient of variation, from
(seed, GPU index) alone, so that the same seed gives the same cluster whatever else changes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from topology.errors import SpecError


@dataclass(frozen=True, slots=True)
class SlowGpu:
    gpu: int  # global GPU index: node * gpus_per_node + local index
    compute_time_factor: float


@dataclass(frozen=True, slots=True)
class DegradedLink:
    """A node's NIC (`node` and `nic`) or a GPU's NVLink port (`gpu`), carrying `bandwidth_factor` of its rate."""

    bandwidth_factor: float
    node: int | None = None
    nic: int | None = None
    gpu: int | None = None


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    slow_gpus: tuple[SlowGpu, ...] = ()
    degraded_links: tuple[DegradedLink, ...] = ()
    compute_variability: float = 0.0  # coefficient of variation of the GPUs' compute time

    @property
    def uneven_compute(self) -> bool:
        return bool(self.slow_gpus) or self.compute_variability > 0

    def validate(self, num_gpus: int, num_nodes: int, nics_per_node: int) -> None:
        """Raise SpecError naming the first entry that breaks a rule."""
        if not (math.isfinite(self.compute_variability) and 0 <= self.compute_variability <= 1):
            raise SpecError("cluster.compute_variability", "must be a coefficient of variation in [0, 1]")
        for i, slow in enumerate(self.slow_gpus):
            if not 0 <= slow.gpu < num_gpus:
                raise SpecError(f"cluster.slow_gpus[{i}].gpu", f"must be a GPU of the cluster: 0 to {num_gpus - 1}")
            if not (math.isfinite(slow.compute_time_factor) and 0 < slow.compute_time_factor <= 100):
                raise SpecError(f"cluster.slow_gpus[{i}].compute_time_factor", "must be > 0 and <= 100")
        for i, link in enumerate(self.degraded_links):
            where = f"cluster.degraded_links[{i}]"
            if not (math.isfinite(link.bandwidth_factor) and 0 < link.bandwidth_factor <= 1):
                raise SpecError(f"{where}.bandwidth_factor", "must be > 0 and <= 1")
            if (link.gpu is None) == (link.node is None):
                raise SpecError(where, "name a GPU's NVLink port (gpu) or a node's NIC (node and nic), one of them")
            if link.gpu is not None and not 0 <= link.gpu < num_gpus:
                raise SpecError(f"{where}.gpu", f"must be a GPU of the cluster: 0 to {num_gpus - 1}")
            if link.gpu is not None and link.nic is not None:
                raise SpecError(f"{where}.nic", "names a node's NIC: give it with node, not with gpu")
            if link.node is not None:
                if not 0 <= link.node < num_nodes:
                    raise SpecError(f"{where}.node", f"must be a node of the cluster: 0 to {num_nodes - 1}")
                if link.nic is None or not 0 <= link.nic < nics_per_node:
                    raise SpecError(f"{where}.nic", f"must be a NIC of the node: 0 to {nics_per_node - 1}")

    def compute_time_factors(self, num_gpus: int, seed: int) -> tuple[float, ...]:
        """Every GPU's compute time factor: its variability draw times its slow-GPU factor (1 where neither)."""
        factors = [1.0] * num_gpus
        cv = self.compute_variability
        if cv > 0:
            # Log-normal of mean 1 and coefficient of variation cv: sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2.
            sigma = math.sqrt(math.log1p(cv * cv))
            for gpu in range(num_gpus):
                z = random.Random(f"clustersim-variability/{seed}/{gpu}").gauss(0.0, 1.0)
                factors[gpu] = math.exp(sigma * z - sigma * sigma / 2)
        for slow in self.slow_gpus:
            factors[slow.gpu] *= slow.compute_time_factor
        return tuple(factors)
