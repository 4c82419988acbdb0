"""How NCCL's NVLS kernels run, where NCCL's own time estimate (simcore/cost/comm/nccl_tuning.py) misses: the chunked
pipeline of NVLink SHARP collectives.

NCCL chooses an algorithm by its estimate, latency + S / bandwidth, with a fixed NVLS latency (25 us on NVLink)
and a flat NVLS bandwidth. The kernel that then runs (NVIDIA/nccl @5067397c) is a pipeline of chunks:
- src/transport/nvls.cc: NVLS runs on 16 channels on Hopper (NVLS_NCHANNELS_SM90; Blackwell 24 in one NVLink
  domain, 32 across), chunks of NCCL_NVLS_CHUNKSIZE = 128 KiB; every local rank is a head (nHeads = ppn).
- src/enqueue.cc calcCollChunking: smaller buffers get smaller chunks. With concurrentOps = channels x heads,
  NVLS takes 64 KiB below 64 x concurrentOps x chunk, 32 KiB below 8 x, 16 KiB below 2 x; the NVLS tree starts
  from min(chunk, nvlsTreeMaxChunkSize: 64 KiB from 4 nodes) and halves to 256/128/64/32 KiB below
  32/16/4/1 x concurrentOps x chunk.
- src/device/all_reduce.h (RunWorkColl NVLS, one node): each channel's warps split into groups that form a
  pipeline over the loop's iterations, each iteration moving heads x chunk of the channel's part: scatter (the
  send buffer into the heads' buffers), reduce (multimem.ld_reduce, then multimem.st to every GPU), gather (into
  the receive buffer): three stages. reduce_scatter.h and all_gather.h run two (scatter and reduce, or scatter
  and gather). The NVLS tree all-reduce (NVLS_TREE) adds the tree's send and receive between the reduce and the
  broadcast: four stages on the node.

So a collective of S bytes runs ceil(S / (concurrentOps x chunk)) iterations, each costing its bytes at the link
rate plus a fixed synchronisation between the stages (flags in the heads' buffers, polled over NVLink), and the
pipeline fills for (stages - 1) iterations before the last stage starts:

    time = launch + (iterations + stages - 1) x (concurrentOps x chunk' / rate + sync)

where chunk' = S / (concurrentOps x iterations) and `rate` is the NVLS flow pattern's rate on the links (bytes of S
per second; the simulator runs S over the links at the rate they give, so the pipeline's fill and its
synchronisations are the phase's latency). `launch` and `sync` are fitted (bench/nccl_curve.py --fit) to the one
NVLS curve in collectives.json, 8 H100s of a DGX H100 from 2 MiB to 16 GiB (nccl-h100-8gpu-intranode-allreduce-
curve): 4.70 us and 5.72 us, every point within 3.1% with the links at NVLink's bulk efficiency and no other
factor. NCCL's flat estimate is 20-30% fast between 2 and 32 MiB there. The same two constants serve
reduce-scatter, all-gather and the NVLS tree (no measured curve: an extrapolation); across nodes the tree's
network latency (NCCL's, 2 log2(nodes) hops) is added.
"""

from __future__ import annotations

import math

from simcore.cost.comm.nccl_tuning import Collective, Communicator, NcclAlgorithm, log2i

NVLS_CHANNELS_ONE_DOMAIN = {"hopper": 16, "blackwell": 24}
NVLS_CHANNELS_ACROSS = {"hopper": 16, "blackwell": 32}
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_TREE_MAX_CHUNK_FROM_4_NODES = 64 * 1024
# Fitted to collectives.json's H100 all-reduce curve (module docstring; bench/nccl_curve.py --fit).
NVLS_LAUNCH_S = 4.70e-6
NVLS_SYNC_S = 5.72e-6
NVLS_TREE_NET_LATENCY_S = 20.9e-6  # tuning.cc hwLat[NET][NVLS_TREE][Simple], per tree hop


def stages(kind: Collective, algorithm: NcclAlgorithm) -> int:
    """The kernel's pipeline stages (module docstring)."""
    if kind is not Collective.ALL_REDUCE:
        return 2
    return 4 if algorithm is NcclAlgorithm.NVLS_TREE else 3


def nvls_channels(comm: Communicator) -> int:
    table = NVLS_CHANNELS_ONE_DOMAIN if comm.nodes == 1 else NVLS_CHANNELS_ACROSS
    return table.get(comm.generation, 16)


def chunk_bytes(algorithm: NcclAlgorithm, comm: Communicator, size_bytes: float) -> int:
    """calcCollChunking's chunk for NVLS or the NVLS tree."""
    ops = nvls_channels(comm) * comm.ppn
    chunk = NVLS_CHUNK_BYTES
    if algorithm is NcclAlgorithm.NVLS:
        for times, smaller in ((64, 65536), (8, 32768), (2, 16384)):
            if size_bytes < times * ops * chunk and chunk > smaller:
                chunk = smaller
        return chunk
    if comm.nodes >= 4:
        chunk = min(chunk, NVLS_TREE_MAX_CHUNK_FROM_4_NODES)
    for times, smaller in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if size_bytes < times * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_latency_s(kind: Collective, algorithm: NcclAlgorithm, comm: Communicator, size_bytes: float,
                   rate_bytes_per_s: float, launch_s: float = NVLS_LAUNCH_S, sync_s: float = NVLS_SYNC_S) -> float:
    """The fixed part of an NVLS collective's time (launch, synchronisations, pipeline fill), seconds, given the
    rate its flow pattern gets on the links alone; the rest is S / rate. `launch_s` and `sync_s` are the fitted
    constants unless given (bench/nccl_curve.py --fit varies them)."""
    ops = nvls_channels(comm) * comm.ppn
    chunk = chunk_bytes(algorithm, comm, size_bytes)
    iterations = max(1, math.ceil(size_bytes / (ops * chunk)))
    fill = stages(kind, algorithm) - 1
    per_iteration = size_bytes / iterations  # bytes of S one iteration moves
    latency = launch_s + (iterations + fill) * sync_s + fill * per_iteration / rate_bytes_per_s
    if algorithm is NcclAlgorithm.NVLS_TREE:
        latency += 2 * max(0, log2i(comm.nodes)) * NVLS_TREE_NET_LATENCY_S
    return latency
