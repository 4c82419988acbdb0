"""Context parallelism's choices and rules (Megatron-Core's and Transformer Engine's), read by
simcore/domain/layout.py's Layout (which imports this module) and costed by simcore/cost/context_parallel.py."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from simcore.domain.model import ModelShape
from topology.errors import SpecError

__all__ = ["CpComm", "validate_context_parallel"]


class CpComm(StrEnum):
    """How context-parallel ranks exchange keys and values (simcore/cost/context_parallel.py)."""

    P2P = "p2p"  # Megatron-Core / Transformer Engine's ring: K/V blocks passed to the next rank, under attention
    ALL_GATHER = "all_gather"  # Llama 3: K/V all-gathered before attention, their gradients reduce-scattered
    A2A = "a2a"  # DeepSpeed-Ulysses style: all-to-alls trade sequence for heads; attention on whole sequences


class _ContextParallelLayout(Protocol):
    """What these rules read of a layout."""

    @property
    def cp(self) -> int: ...
    @property
    def cp_comm(self) -> CpComm: ...
    @property
    def tp(self) -> int: ...
    @property
    def sequence_parallel(self) -> bool: ...


def validate_context_parallel(layout: _ContextParallelLayout, model: ModelShape) -> None:
    """Context parallelism's rules (Megatron-Core and Transformer Engine's): the sequence splits into 2*cp equal
    chunks (each rank takes chunks r and 2cp-1-r, which balances causal attention); the ring runs fused
    attention kernels; encoder-decoder models are not split (Megatron-Core supports CP for GPT models only); a2a
    splits the heads a tensor rank holds over the cp ranks."""
    cp = layout.cp
    if cp == 1:
        return
    if model.encoder_decoder:
        raise SpecError("layout.cp", "context parallelism (cp > 1) is not supported for encoder_decoder models "
                        "(Megatron-Core splits only decoder-only and encoder-only sequences)")
    if model.seq_length % (2 * cp):
        raise SpecError("layout.cp", f"seq_length ({model.seq_length}) must be divisible by 2*cp = {2 * cp} "
                        "(each rank holds two of 2*cp equal chunks, for causal load balancing)")
    if model.attention.value != "flash":
        raise SpecError("layout.cp", "context parallelism needs model.attention flash (Transformer Engine runs "
                        "the ring's attention blocks with fused attention kernels)")
    if layout.sequence_parallel and (model.seq_length // cp) % layout.tp:
        raise SpecError("layout.sequence_parallel", f"needs tp to divide seq_length / cp ({model.seq_length // cp})")
    if layout.cp_comm is CpComm.A2A:
        # TransformerEngine @d0067d0 attention/dot_product_attention/context_parallel.py
        # AttnFuncWithCPAndQKVOA2A.forward: "cp_comm_type='a2a' requires num_heads % cp_size == 0 for Q, K, V"
        # (the heads of a tensor rank; key/value heads fewer than tp are replicated, one a rank)
        heads, kv_heads = model.num_attention_heads // layout.tp, max(model.num_kv_heads // layout.tp, 1)
        if heads % cp or kv_heads % cp:
            raise SpecError("layout.cp_comm", f"a2a needs cp ({cp}) to divide the attention heads ({heads}) and the "
                            f"key/value heads ({kv_heads}) of a tensor rank: each CP rank attends with 1/cp of them")
