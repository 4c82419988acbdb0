"""Collective times from the user's nccl-tests tables (cluster.measured, topology/measured.py) in place of the
collective model's, as a factor on the model's phases.

For a collective of S bytes over a group, the model's phases (simcore/cost/comm/collectives.py) take t_model(S) alone on
the links. A measured table of the same collective and scope (within one NVLink domain, or across domains) gives
the time the user's cluster took; the phases' link loads and latencies are multiplied by factor = t_measured /
t_model, so the collective takes the measured time alone on the links and still shares them, with that larger load,
with whatever else runs beside it (concurrent copies of a data-parallel collective, pipeline sends).

- Hosts and domains: a table's `nodes` are the hosts (servers) nccl-tests' `# Using devices` lines name. They are
  laid over this cluster's hosts in order (ClusterSpec.host_gpus: the node, or a 4-GPU compute tray of a GB200
  NVL72 rack whose node is the rack), and the table's scope is the NVLink domains those hosts span: on DGX nodes a
  host is a domain, so 2 hosts are 2 domains; on an NVL72 rack (72-GPU domain, 18 hosts of 4 GPUs) up to 18 hosts
  are one domain, and a 2-host table measures NVLink, not the network. (The run's hosts are taken to be the
  cluster's first ones, in one rack where they fit: nccl-tests does not say which rack a host is in.)
- Which table: of the tables of that collective whose scope is the group's, the one nearest in domains, then hosts,
  then ranks (log scale). No table of the scope: the model's time (nothing measured there).
- The reference: the table's own configuration laid out on this cluster, its ranks in order over its hosts
  (nccl-tests runs one communicator in rank order): factor(S) = t_table(S) / t_model(reference, S). On the group
  itself the model's time is scaled by that factor, so a group equal to the table's configuration takes the
  measured time, and one of other ranks or hosts keeps the model's difference between the two. Where the table's
  configuration does not fit on the cluster (more hosts than it has, or more ranks on a host than its hosts hold),
  the reference is the group alone and the table's bus bandwidth is taken for the group's: t = t_table x
  f(n_group) / f(n_table), with nccl-tests' bus-bandwidth factor f (2(n-1)/n for all-reduce, (n-1)/n for
  all-gather and reduce-scatter: nccl-tests src/all_reduce.cu AllReduceGetBw, all_gather.cu, reduce_scatter.cu;
  doc/PERFORMANCE.md).
- Between measured sizes t_table is interpolated linearly in log size and log time (a power law between two rows,
  which keeps bus bandwidth monotone between them); outside the measured range the factor at the nearest measured
  size is used: the model's shape of the curve, scaled by the nearest measured ratio (an extrapolation, which the
  overlay `clustersim calibrate` writes says in its `extrapolation` notes).
- sendrecv and alltoall tables scale the bandwidth of point-to-point sends (pipeline sends, context-parallel ring
  steps: collectives.p2p) and of MoE's all-to-all (simcore/cost/moe.py), whose patterns do not depend on the
  message size: the factor is the table's time over the model's at the table's largest size (the bandwidth
  regime), on the table's configuration laid out as above (sendrecv: nccl-tests' ring, each rank sending to the
  next; alltoall: one group of its ranks), and it scales the pattern's link loads, not its latency. A send within
  one NVLink domain takes the factor of a within-domain table, one across domains an across-domains one.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simcore.cost.comm.link_loads import by_domain
from simcore.cost.comm.nccl_tuning import Collective
from topology.graph import Cluster
from topology.measured import COLLECTIVES, MeasuredCollective

__all__ = ["MeasuredCollectives", "TableUse", "bus_factor", "interpolated_time"]

Groups = Sequence[Sequence[int]]
ModelTime = Callable[[tuple[tuple[int, ...], ...], float], float]  # (groups, size) -> the model's seconds alone


def bus_factor(kind: Collective, n: int) -> float:
    """nccl-tests' bus bandwidth over algorithm bandwidth for `kind` on n ranks."""
    return 2 * (n - 1) / n if kind is Collective.ALL_REDUCE else (n - 1) / n


def interpolated_time(table: MeasuredCollective, size_bytes: float) -> float:
    """The table's time (s) at `size_bytes`, linear in log size and log time between its rows; `size_bytes` must lie
    within its sizes."""
    sizes, times = table.sizes_bytes, table.times_s
    i = bisect_left(sizes, size_bytes)
    if i < len(sizes) and sizes[i] == size_bytes:
        return times[i]
    lo, hi = i - 1, i
    w = (math.log(size_bytes) - math.log(sizes[lo])) / (math.log(sizes[hi]) - math.log(sizes[lo]))
    return math.exp(math.log(times[lo]) + w * (math.log(times[hi]) - math.log(times[lo])))


@dataclass(slots=True)
class TableUse:
    """What the collectives priced since `MeasuredCollectives.used` was last cleared took from one table beyond what
    it measured: sizes outside its rows, groups of another configuration than its own, its bus bandwidth where its
    configuration does not fit on the cluster, its bandwidth at one size for transfers of every size."""

    table: MeasuredCollective
    outside_bytes: set[float] = field(default_factory=set)  # sizes priced outside its rows
    groups: set[tuple[int, int, int]] = field(default_factory=set)  # (ranks, hosts, domains) other than its own
    unplaced: bool = False  # its configuration does not fit on the cluster
    transfers: bool = False  # it scaled sendrecv or alltoall transfers


Shape = tuple[int, int, int]  # a group's ranks, hosts and NVLink domains


class MeasuredCollectives:
    """The measured tables of one cluster, and the factor they put on the model's collective times (module
    docstring). Factors are cached by collective, group and size; `used` collects where they extrapolate."""

    def __init__(self, cluster: Cluster, tables: Sequence[MeasuredCollective]) -> None:
        self.cluster = cluster
        self._tables = {kind: [t for t in tables if t.collective == kind] for kind in COLLECTIVES}
        self._factors: dict[tuple[Collective, tuple[int, ...], float],
                            tuple[float, MeasuredCollective | None, Shape]] = {}
        self._transfers: dict[tuple[str, int, int], float] = {}
        self.used: dict[tuple[str, int, int], TableUse] = {}  # by table (collective, ranks, hosts)

    def _use(self, table: MeasuredCollective, shape: Shape | None) -> TableUse:
        """The table's record in `used`, with a group of `shape` priced from it (None: a transfer, which takes the
        table's bandwidth whatever its group)."""
        found = self.used.get((table.collective, table.ranks, table.nodes))
        if found is None:
            found = self.used[(table.collective, table.ranks, table.nodes)] = TableUse(table)
        if shape is not None and shape != (table.ranks, table.nodes, self.domains(table)):
            found.groups.add(shape)
        found.unplaced = found.unplaced or self.reference(table) is None
        return found

    def shape(self, group: Sequence[int]) -> Shape:
        return len(group), self.hosts(group), len(by_domain(self.cluster, group))

    def covers(self, kind: Collective | str) -> bool:
        return bool(self._tables[str(kind)])

    def hosts(self, gpus: Sequence[int]) -> int:
        """The hosts (servers) `gpus` are on."""
        per_host = self.cluster.spec.host_gpus
        return len({g // per_host for g in gpus})

    def domains(self, table: MeasuredCollective) -> int:
        """The NVLink domains the table's hosts span on this cluster: its hosts laid over the cluster's in order
        (`reference`), or, where its hosts hold more GPUs than this cluster's, as many hosts a domain as fit."""
        reference = self.reference(table)
        if reference is not None:
            return len(by_domain(self.cluster, reference))
        spec = self.cluster.spec
        return -(-table.nodes // max(1, spec.domain_gpus // spec.host_gpus))

    def table_for(self, kind: Collective | str, group: Sequence[int]) -> MeasuredCollective | None:
        """The table of `kind` whose scope is the group's (within one NVLink domain, or across domains), nearest
        in domains, then hosts, then ranks; None if none is."""
        domains = len(by_domain(self.cluster, group))
        same = [t for t in self._tables[str(kind)] if (self.domains(t) == 1) == (domains == 1)]
        if not same:
            return None
        hosts = self.hosts(group)
        return min(same, key=lambda t: (abs(math.log(self.domains(t) / domains)), abs(math.log(t.nodes / hosts)),
                                        abs(math.log(t.ranks / len(group)))))

    def reference(self, table: MeasuredCollective) -> tuple[int, ...] | None:
        """The table's configuration on this cluster: its ranks in order over its hosts, host h on the cluster's
        host h (nccl-tests runs one communicator in rank order, the ranks of a host together), or None where the
        cluster has too few hosts or too few GPUs in one."""
        per_host, spec = table.ranks // table.nodes, self.cluster.spec
        host = spec.host_gpus
        if per_host > host or table.nodes * host > spec.num_gpus:
            return None
        return tuple(h * host + j for h in range(table.nodes) for j in range(per_host))

    def factor(self, kind: Collective, groups: Groups, size_bytes: float, model_time: ModelTime) -> float:
        """Measured over modelled time for `kind` on `size_bytes` over the first group (1.0 where no table of its
        scope exists)."""
        group = tuple(groups[0])
        key = (kind, group, size_bytes)
        found = self._factors.get(key)
        if found is None:
            table = self.table_for(kind, group)
            factor = self._factor(kind, table, group, size_bytes, model_time) if table is not None else 1.0
            found = self._factors[key] = (factor, table, self.shape(group))
        factor, table, shape = found
        if table is not None and size_bytes > 0:  # where this table was used, every time (`used`)
            use = self._use(table, shape)
            if not table.sizes_bytes[0] <= size_bytes <= table.sizes_bytes[-1]:
                use.outside_bytes.add(size_bytes)
        return factor

    def _factor(self, kind: Collective, table: MeasuredCollective, group: tuple[int, ...], size_bytes: float,
                model_time: ModelTime) -> float:
        if size_bytes <= 0:
            return 1.0
        size = min(max(size_bytes, table.sizes_bytes[0]), table.sizes_bytes[-1])  # outside: the nearest row's ratio
        measured = interpolated_time(table, size)
        reference = self.reference(table)
        if reference is None:  # the table's bus bandwidth, on the group itself
            reference = group
            measured *= bus_factor(kind, len(group)) / bus_factor(kind, table.ranks)
        modelled = model_time((reference,), size)
        return measured / modelled if modelled > 0 else 1.0

    def transfer_factor(self, kind: str, group: Sequence[int],
                        model_time: Callable[[str, tuple[int, ...], float], float]) -> float:
        """Measured over modelled time of a `kind` ("sendrecv" or "alltoall") transfer over `group` (a send's two
        GPUs, or an all-to-all's members) at the largest size of the table of its scope (module docstring);
        `model_time(kind, reference, size)` is the model's seconds alone on the links; 1.0 where no table of the
        scope exists or its configuration does not fit on the cluster. Cached per kind and scope."""
        table = self.table_for(kind, group)
        if table is None:
            return 1.0
        self._use(table, None).transfers = True
        key = (kind, table.ranks, table.nodes)
        found = self._transfers.get(key)
        if found is None:
            reference = self.reference(table)
            size = table.sizes_bytes[-1]
            modelled = model_time(kind, reference, size) if reference is not None and len(reference) > 1 else 0.0
            found = self._transfers[key] = table.times_s[-1] / modelled if modelled > 0 else 1.0
        return found
