"""Interference: compute beside communication kernels runs slower, from the SMs and the HBM bandwidth that the
collective's channels take.

NCCL runs a collective as one CUDA block per channel, each resident on one SM for the whole collective
(src/enqueue.cc: nChannels blocks of nThreads; tuning.cc's channel counts). A GEMM or attention kernel launched
beside it runs its waves on the SMs left: of the GPU's N SMs it loses `comm_sm_share` x channels (the share of
an SM a resident NCCL block denies to compute: its threads, registers and shared memory keep a GEMM's block off
that SM; fitted, simcore/cost/fitted.py). A memory-bound kernel (norms, softmax, dropout, activations, the
optimizer) shares HBM with the collective, which reads what it sends and writes and reduces what it receives.
So, for a pass of which a fraction g of the compute time is in GEMMs and attention (compute-bound) and 1 - g in
memory-bound kernels, while collectives with c channels in all move H bytes/s through HBM of bandwidth B:

    slowdown = 1 + g * c' / (N - c') + (1 - g) * H / (B - H),   c' = comm_sm_share * c

(the compute-bound part runs on N - c' SMs instead of N, the memory-bound part on B - H bytes/s instead of B).
Published overlap studies measure 5-20% slower compute under overlapped communication, and Megatron-Core's
TP-overlap configurations cap the SMs given to communication for that reason (TransformerEngine's userbuffers
`num_sm`); this form gives 17% for a 16-channel collective on an A100's 108 SMs with comm_sm_share = 1.

What is not modelled: the collective's own slowdown beside compute (its rate comes from the links alone), and
the pipeline sends' kernels (one or two channels, short).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.comm.nccl_tuning import Collective


@dataclass(frozen=True, slots=True)
class CommLoad:
    """What one collective in flight takes from its GPU: SMs (channels x the SM share) and HBM bytes/s."""

    sms: float
    hbm_bytes_per_s: float


def hbm_bytes_per_byte(kind: Collective, ranks: int) -> float:
    """HBM traffic on each GPU per byte of the buffer: every byte a GPU sends is read once, every byte it
    receives written once and, for a reduction, read again to be reduced (ring bytes: 2(n-1)/n of the buffer for
    all-reduce, (n-1)/n for the others)."""
    if ranks < 2:
        return 0.0
    if kind is Collective.ALL_REDUCE:
        return 3 * 2 * (ranks - 1) / ranks
    return (3 if kind is Collective.REDUCE_SCATTER else 2) * (ranks - 1) / ranks


def comm_load(kind: Collective, ranks: int, size_bytes: float, seconds: float, channels: int,
              sm_share: float) -> CommLoad:
    """The load of a collective of `size_bytes` that takes `seconds` alone on its links, on `channels`."""
    rate = hbm_bytes_per_byte(kind, ranks) * size_bytes / seconds if seconds > 0 else 0.0
    return CommLoad(sm_share * channels, rate)


def slowdown(sms: float, hbm_bytes_per_s: float, num_sms: int, hbm_bandwidth_bytes_per_s: float,
             gemm_fraction: float) -> float:
    """Factor (>= 1) by which compute takes longer beside collectives that take `sms` SMs and move
    `hbm_bytes_per_s` (their sums over the collectives in flight); the module docstring gives the form."""
    if sms <= 0 and hbm_bytes_per_s <= 0:
        return 1.0
    taken = min(sms, num_sms * 0.9)  # a collective never holds every SM: NCCL caps its channels (MAXCHANNELS)
    moved = min(hbm_bytes_per_s, hbm_bandwidth_bytes_per_s * 0.9)
    return (1.0 + gemm_fraction * taken / (num_sms - taken)
            + (1.0 - gemm_fraction) * moved / (hbm_bandwidth_bytes_per_s - moved))
