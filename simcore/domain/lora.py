"""LoRA fine-tuning (Hu et al. 2021): low-rank adapters beside a frozen base model.

An adapted projection y = x W + (dropout(x) A) B (alpha / r): A is in x r, B is r x out, only A and B train. As
Megatron-Core / NeMo run it for MLPerf's llama2_70b_lora (nemo/collections/llm/peft/lora.py: target_modules
linear_qkv and linear_proj by default; ParallelLinearAdapter splits the adapter over the tensor ranks, A by its
rank dimension beside a column-parallel layer and by its input rows beside a row-parallel one, B by its outputs),
and as the MLPerf reference (mlcommons/training llama2_70b_lora/run_llama_70B_scrolls_r16.sh: PEFT, r 16, alpha 32,
dropout 0.1, lora_target_modules "qkv_proj,o_proj") trains it. Every base weight is frozen: its backward computes
the input gradient only, it has no gradient, no optimizer state and no data-parallel traffic; the embedding and the
output layer are frozen too.

Targets (the contract's names): `qkv` the fused query/key/value projection, `proj` the attention output
projection, `fc1` the MLP's first matrix (both halves of a gated MLP's), `fc2` its second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from simcore.errors import SpecError


class ModelShape(Protocol):
    """What LoRA reads of a model (simcore/domain/model.py's ModelShape, which holds a Lora: no import back)."""

    @property
    def hidden_size(self) -> int: ...
    @property
    def ffn_hidden_size(self) -> int: ...
    @property
    def num_attention_heads(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def gated_mlp(self) -> bool: ...
    @property
    def moe(self) -> object: ...
    @property
    def mla(self) -> object: ...

__all__ = ["DEFAULT_TARGETS", "KERNEL_OF", "Lora", "LoraTarget", "lora_from_fields"]


class LoraTarget(StrEnum):
    QKV = "qkv"
    PROJ = "proj"
    FC1 = "fc1"
    FC2 = "fc2"


# MLPerf's llama2_70b_lora and NeMo's default: the attention's projections.
DEFAULT_TARGETS = (LoraTarget.QKV, LoraTarget.PROJ)
# The layer kernels (simcore/cost/compute/kernels.py) each target adapts, and whether that kernel is column-parallel.
KERNEL_OF = {LoraTarget.QKV: ("qkv", True), LoraTarget.PROJ: ("attention_output", False),
             LoraTarget.FC1: ("mlp_up", True), LoraTarget.FC2: ("mlp_down", False)}


@dataclass(frozen=True, slots=True)
class Lora:
    """Adapters of rank `rank` on `targets` of every transformer layer; the base model frozen."""

    rank: int
    targets: tuple[LoraTarget, ...] = DEFAULT_TARGETS
    dropout: float = 0.0  # on the adapter's input (PEFT's lora_dropout): a memory-bound kernel when > 0

    def dims(self, model: ModelShape, target: LoraTarget) -> tuple[int, int]:
        """(inputs, outputs) of the base matrix a target adapts, unsplit."""
        h, f = model.hidden_size, model.ffn_hidden_size
        attention = model.num_attention_heads * model.head_dim
        if target is LoraTarget.QKV:
            return h, (model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim
        if target is LoraTarget.PROJ:
            return attention, h
        if target is LoraTarget.FC1:
            return h, (2 if model.gated_mlp else 1) * f
        return f, h

    def parameters_per_layer(self, model: ModelShape) -> int:
        """Adapter weights of one layer, unsplit: r (in + out) per target."""
        return sum(self.rank * sum(self.dims(model, target)) for target in self.targets)


def lora_from_fields(value: object, model: ModelShape) -> Lora | None:
    """`model.lora` of a request ({rank, targets, dropout}) for `model`; SpecError naming the field and the rule."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError("model.lora", "must be an object {rank, targets, dropout}")
    rank = value.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise SpecError("model.lora.rank", "must be an integer >= 1")
    if rank > model.hidden_size:
        raise SpecError("model.lora.rank", f"must not exceed hidden_size ({model.hidden_size}): a low-rank adapter")
    raw = value.get("targets", [str(t) for t in DEFAULT_TARGETS])
    if not isinstance(raw, (list, tuple)) or not raw:
        raise SpecError("model.lora.targets", f"must be a non-empty list among {[str(t) for t in LoraTarget]}")
    try:
        targets = tuple(dict.fromkeys(LoraTarget(str(t)) for t in raw))
    except ValueError:
        raise SpecError("model.lora.targets", f"must be among {[str(t) for t in LoraTarget]}") from None
    dropout = value.get("dropout", 0.0)
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise SpecError("model.lora.dropout", "must be a number in [0, 1)")
    if model.moe is not None or model.mla is not None:
        raise SpecError("model.lora", "is modelled for dense models with multi-head (grouped-query) attention only")
    return Lora(rank, targets, float(dropout))
