"""NCCL's tuning model: the algorithm and protocol NCCL runs a collective with, their latency and bandwidth.

Transcribed from NCCL's source (NVIDIA/nccl @5067397c): src/graph/tuning.cc (ncclTopoTuneModel: baseLat,
hwLat, the bandwidth refinements per algorithm and protocol with llMaxBw and the per-channel caps;
ncclTopoGetAlgoTime: treeCorrectionFactor and the ring plateau) and src/enqueue.cc (topoGetAlgoInfo: the pair
of least estimated time wins). For a collective of S bytes NCCL estimates, for every enabled (algorithm,
protocol), time = latency + S / bandwidth and takes the smallest.

What clustersim takes from NCCL and what from its own graph:
- Latencies are NCCL's, in full: a base latency per (algorithm, protocol) plus per-step hardware latencies over
  NVLink and the network (the ring's 2(n-1) steps, the tree's 2(ppn-1 + log2 nodes), NVLS's one or two).
- Bandwidth: NCCL's topology search gives it a per-channel bandwidth; clustersim has the real graph instead. The
  link-bound algorithm bandwidth of each algorithm's flow pattern on the graph (simcore/cost/comm/collectives.py)
  stands for NCCL's Simple-protocol figure, and NCCL's refinements scale it: LL moves 8-byte lines with 4 bytes
  of flags (half the bandwidth, capped at llMaxBw), LL128 120 of every 128 bytes (0.92), tree all-reduce 0.92 of
  the graph's figure with treeCorrectionFactor at medium sizes, NVLS its nvlsEfficiency; each capped per
  channel as in NCCL. `bandwidth_factor` is that scale; the simulator divides the pattern's link loads by it, so
  a protocol's overhead also loads the links it shares with other traffic.
- Channels: NCCL runs as many channels as its search finds rings, doubled (search.cc dupChannels). clustersim
  counts one ring per NIC a communicator's node uses across nodes and, inside a node, the GPU's NVLink bandwidth
  over the search's fastest per-channel speed (speedArrayIntra[0]: 40 GB/s before Hopper, 60 Hopper, 90
  Blackwell); doubled, at most 32. The per-channel caps rarely bind at these counts.
- Host CPU (NCCL's multi-node llMaxBw row and its per-step network overhead): DGX A100 has AMD EPYC hosts, the
  other DGX generations Intel Xeon (Grace counts as not AMD, as in NCCL).
- PCIe-only nodes (no NVLink, topology/pcie.py): NCCL's graph then has typeIntra PCI, so its intra-node hardware
  latencies are the PCI row, LL128 is off (enabled only up to NVLink paths: typeIntra <= PATH_NVB) and there is
  no NVLS (no NVSwitch). Ada (sm_89) GPUs use NCCL's Ampere row of the per-generation tables (compCapIndex: 8.x).
- Left out: CollNet (needs SHARP switches), PAT (one GPU per node, NCCL 2.23 and later), NVLS across nodes
  without CollNet (NCCL disables it), user tuner plugins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Collective(StrEnum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"


class NcclAlgorithm(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"  # NVLink SHARP: the NVSwitch reduces and multicasts (Hopper and later, inside a domain)
    NVLS_TREE = "nvls_tree"  # NVLS inside each domain, a tree between domains (all-reduce)


class Protocol(StrEnum):
    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


PROTOCOLS = (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)
_P = {p: i for i, p in enumerate(PROTOCOLS)}

# tuning.cc ncclTunerConstantsDefaults, microseconds, per protocol (LL, LL128, Simple).
BASE_LATENCY_US = {NcclAlgorithm.TREE: (6.8, 14.0, 8.4), NcclAlgorithm.RING: (6.6, 14.0, 8.4),
                   NcclAlgorithm.NVLS: (0.0, 0.0, 0.0), NcclAlgorithm.NVLS_TREE: (0.0, 0.0, 0.0)}
HW_LATENCY_US = {
    "nvlink": {NcclAlgorithm.TREE: (0.6, 1.25, 4.0), NcclAlgorithm.RING: (0.6, 1.9, 3.4),
               NcclAlgorithm.NVLS: (0.0, 0.0, 25.0), NcclAlgorithm.NVLS_TREE: (0.0, 0.0, 25.0)},
    "pci": {NcclAlgorithm.TREE: (1.0, 1.9, 4.0), NcclAlgorithm.RING: (1.0, 2.5, 5.7),
            NcclAlgorithm.NVLS: (0.0, 0.0, 0.0), NcclAlgorithm.NVLS_TREE: (0.0, 0.0, 0.0)},
    "net": {NcclAlgorithm.TREE: (5.0, 8.5, 14.0), NcclAlgorithm.RING: (2.7, 4.0, 14.0),
            NcclAlgorithm.NVLS: (0.0, 0.0, 18.0), NcclAlgorithm.NVLS_TREE: (0.0, 0.0, 20.9)},
}
# llMaxBws (GB/s): one node by GPU generation; several by host CPU (Intel row, AMD row), 2 nodes / more.
LL_MAX_BW_ONE_NODE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_MAX_BW_NODES = {False: (39.0, 20.4), True: (22.5, 19.0)}  # amd_host -> (2 nodes, more)
# Per-channel caps (GB/s) by generation, for 1 node, 2 nodes, more.
PER_CH_RING_LL128 = {"volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7,) * 3,
                     "blackwell": (40.0,) * 3}
PER_CH_TREE_LL128 = {"volta": (20.0,) * 3, "ampere": (20.0,) * 3, "hopper": (36.7, 36.7, 29.0),
                     "blackwell": (55.6, 31.67, 20.0)}
PER_CH_TREE = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
               "blackwell": (70.0, 42.8, 24.0)}
PER_CH_NVLS_TREE = {"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
# ncclTopoGetAlgoTime: tree all-reduce bandwidth correction by log2(bytes / 64), 64 B to 256 MiB.
TREE_CORRECTION = {
    Protocol.LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
                  1.0, 1.0),
    Protocol.LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
                     1.0, 1.0),
    Protocol.SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
                      .9),
}
# search.cc speedArrayIntra[0] (GB/s per channel) by generation; NCCL's MAXCHANNELS for collectives.
TOP_CHANNEL_SPEED = {"volta": 40.0, "ampere": 40.0, "ada": 40.0, "hopper": 60.0, "blackwell": 90.0}
# GPU generations that NCCL's per-generation tables file under another's row (tuning.cc compCapIndex).
TABLE_ROW = {"ada": "ampere"}
MAX_CHANNELS = 32
# Rings NCCL's topology search may find (src/init.cc: ringGraph->maxChannels = MAXCHANNELS / 2, MAXCHANNELS 64).
MAX_RINGS = 32
NVLS_MAX_ARITY = 32  # device.h NCCL_MAX_NVLS_ARITY: NVLS reduce-scatter / all-gather up to 32 local ranks


@dataclass(frozen=True, slots=True)
class Communicator:
    """What NCCL's tuning sees of a communicator: ranks, nodes (NVLink domains), the GPU generation, its
    channels, the host CPU's vendor and whether the NVSwitch does NVLink SHARP."""

    ranks: int
    nodes: int
    generation: str
    channels: int
    amd_host: bool = False
    nvls: bool = False
    pcie: bool = False  # the GPUs of a node reach each other over PCIe only (no NVLink)

    @property
    def ppn(self) -> int:
        return self.ranks // self.nodes

    @property
    def row(self) -> str:
        """The generation whose row of NCCL's per-generation tables applies."""
        return TABLE_ROW.get(self.generation, self.generation)


@dataclass(frozen=True, slots=True)
class Choice:
    """An (algorithm, protocol) for one collective: its latency (s), the fraction of the algorithm's link-bound
    bandwidth the protocol reaches (`bandwidth_factor`), and NCCL's time estimate (s) alone on the links."""

    algorithm: NcclAlgorithm
    protocol: Protocol
    latency_s: float
    bandwidth_factor: float
    time_s: float

    @property
    def label(self) -> str:
        return f"{self.algorithm.value}/{self.protocol.value}"


def channels(generation: str, nodes: int, nics_per_node_used: int, nvlink_bytes_per_s: float) -> int:
    """NCCL's channel count for a communicator (see the module docstring)."""
    rings = nics_per_node_used if nodes > 1 else math.ceil(nvlink_bytes_per_s / 1e9 / TOP_CHANNEL_SPEED[generation])
    return max(2, min(MAX_CHANNELS, 2 * max(1, rings)))


def algorithms(kind: Collective, comm: Communicator) -> tuple[NcclAlgorithm, ...]:
    """The algorithms NCCL may run `kind` with on `comm` (tuning.cc's and enqueue.cc's filters)."""
    if comm.ranks < 2:
        return ()
    if kind is not Collective.ALL_REDUCE:
        nvls = comm.nvls and comm.nodes == 1 and comm.ppn <= NVLS_MAX_ARITY
        return (NcclAlgorithm.RING, NcclAlgorithm.NVLS) if nvls else (NcclAlgorithm.RING,)
    found = [NcclAlgorithm.RING, NcclAlgorithm.TREE]
    if comm.nvls and comm.ppn > 1:
        found.append(NcclAlgorithm.NVLS if comm.nodes == 1 else NcclAlgorithm.NVLS_TREE)
    return tuple(found)


def protocols(algorithm: NcclAlgorithm) -> tuple[Protocol, ...]:
    """NVLS and NVLS tree run Simple only."""
    return (Protocol.SIMPLE,) if algorithm in (NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE) else PROTOCOLS


def _steps(kind: Collective, n: int) -> int:
    return 2 * (n - 1) if kind is Collective.ALL_REDUCE else n - 1


def _node_index(comm: Communicator) -> int:
    return min(comm.nodes, 3) - 1


def latency_us(kind: Collective, algorithm: NcclAlgorithm, protocol: Protocol, comm: Communicator,
               size_bytes: float) -> float:
    """NCCL's latency of one collective, microseconds (tuning.cc, with ncclTopoGetAlgoTime's ring plateau)."""
    p = _P[protocol]
    lat = BASE_LATENCY_US[algorithm][p]
    intra = HW_LATENCY_US["pci" if comm.pcie else "nvlink"][algorithm][p]
    # With one GPU per node every step crosses the network: NCCL then takes the tree's network latency.
    inter = HW_LATENCY_US["net"][NcclAlgorithm.TREE if comm.ppn == 1 else algorithm][p]
    nodes = comm.nodes
    if algorithm is NcclAlgorithm.RING:
        steps = _steps(kind, comm.ranks)
        if nodes > 1:  # inter-node rings launch every step through the network proxy
            overhead = (2.0 if comm.amd_host else 1.0) * (3 if protocol is Protocol.SIMPLE else 1)
            intra = max(intra, overhead)
        inter_steps = 0 if nodes == 1 else _steps(kind, nodes)
        lat += (steps - inter_steps) * intra + inter_steps * inter
        if (protocol is Protocol.SIMPLE and nodes > 1 and kind is Collective.ALL_REDUCE
                and size_bytes / (comm.channels * comm.ranks) >= 64):
            lat *= 1.9 if comm.generation == "volta" else 1.4  # the ring's plateau
    elif algorithm is NcclAlgorithm.TREE:
        lat += 2 * ((comm.ppn - 1) * intra + log2i(nodes) * inter)
    elif algorithm is NcclAlgorithm.NVLS:
        lat = intra + (inter if nodes > 1 else 0.0)
    else:
        lat += intra + 2 * log2i(nodes) * inter
    return lat


def bandwidth_factor(kind: Collective, algorithm: NcclAlgorithm, protocol: Protocol, comm: Communicator,
                     bus_bytes_per_s: float, size_bytes: float) -> float:
    """The fraction of the graph's bus bandwidth for the algorithm (`bus_bytes_per_s`, NCCL's nChannels x bw)
    that NCCL's model gives this (algorithm, protocol): tuning.cc's refinements and caps, ncclTopoGetAlgoTime's
    tree correction."""
    gen, k = comm.row, _node_index(comm)
    nch = comm.channels
    bus = bus_bytes_per_s / 1e9
    if bus <= 0:
        return 0.0
    ll_max = LL_MAX_BW_ONE_NODE[gen] if comm.nodes == 1 else LL_MAX_BW_NODES[comm.amd_host][k - 1]
    got = bus
    if algorithm is NcclAlgorithm.RING:
        if protocol is Protocol.LL:
            got = min(ll_max, bus * 0.5)
        elif protocol is Protocol.LL128:
            got = min(bus * 0.92, nch * PER_CH_RING_LL128[gen][k])
    elif algorithm is NcclAlgorithm.TREE:
        got = min(bus * 0.92, nch * PER_CH_TREE[gen][k])
        if protocol is Protocol.LL:
            got = min(got / 3.8, ll_max)
        elif protocol is Protocol.LL128:
            got = min(got * (7.0 / 9.0 if comm.nodes == 1 else 120.0 / 128.0), nch * PER_CH_TREE_LL128[gen][k])
        log_size = log2i(int(size_bytes) >> 6)
        if kind is Collective.ALL_REDUCE and 0 <= log_size < 23:
            got *= TREE_CORRECTION[protocol][log_size]
    else:
        got = bus * NVLS_EFFICIENCY.get(gen, 0.0)
        cap = PER_CH_NVLS_TREE.get(gen, (0.0,) * 3)[k]
        if algorithm is NcclAlgorithm.NVLS_TREE and cap > 0:
            got = min(got, nch * cap)
    return got / bus


def algorithm_bandwidth(kind: Collective, algorithm: NcclAlgorithm, ranks: int, bus_bytes_per_s: float) -> float:
    """NCCL's conversion of bus bandwidth to algorithm bandwidth: x n / steps (ring, NVLS), x 1/2 (tree)."""
    if algorithm is NcclAlgorithm.TREE:
        return bus_bytes_per_s * 0.5
    return bus_bytes_per_s * ranks / _steps(kind, ranks)


def choose(kind: Collective, size_bytes: float, comm: Communicator,
           bus_bytes_per_s: Mapping[NcclAlgorithm, float]) -> Choice:
    """NCCL's pick for `size_bytes`: the (algorithm, protocol) of least latency + S / bandwidth among the
    algorithms given a graph bus bandwidth; ties go to the first in NCCL's order (tree, ring, NVLS, NVLS tree;
    LL, LL128, Simple)."""
    best: Choice | None = None
    for algorithm in (NcclAlgorithm.TREE, NcclAlgorithm.RING, NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE):
        bus = bus_bytes_per_s.get(algorithm, 0.0)
        if bus <= 0:
            continue
        for protocol in protocols(algorithm):
            if protocol is Protocol.LL128 and comm.pcie:
                continue  # (LL128 runs only over NVLink paths)
            factor = bandwidth_factor(kind, algorithm, protocol, comm, bus, size_bytes)
            if factor <= 0:
                continue
            latency = latency_us(kind, algorithm, protocol, comm, size_bytes) * 1e-6
            time = latency + size_bytes / algorithm_bandwidth(kind, algorithm, comm.ranks, bus * factor)
            if best is None or time < best.time_s:
                best = Choice(algorithm, protocol, latency, factor, time)
    if best is None:
        raise ValueError(f"no NCCL algorithm for {kind} on {comm.ranks} ranks")
    return best


def log2i(n: int) -> int:
    """NCCL's log2i: floor(log2 n), -1 for n < 1."""
    return n.bit_length() - 1 if n >= 1 else -1
