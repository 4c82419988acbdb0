"""Mixture-of-experts and multi-head latent attention shapes (domain objects), the expert layout's rules, and the
expert-parallel groups of Megatron-Core's "parallel folding".

A MoE transformer layer replaces the dense MLP with a router (a hidden x num_experts GEMM, softmax and top-k),
`num_experts` routed experts each an MLP of `ffn_hidden_size`, of which every token uses `top_k`, and
`num_shared_experts` always-active experts (one MLP of num_shared_experts x ffn_hidden_size). The first
`first_dense_layers` layers keep the dense MLP (DeepSeek-V3: 3).

MLA (DeepSeek-V2/V3): queries through a low-rank down projection (q_lora_rank; 0 = a direct projection),
keys and values through a shared latent of kv_lora_rank plus a decoupled rotary key of qk_rope_head_dim; each
head's query and key have head_dim ("nope") + qk_rope_head_dim dimensions and its value v_head_dim.

Parallel folding (Megatron-Core, `megatron/core/parallel_state.py`, RankGenerator with the expert order
"tp-ep-dp-pp"): the attention part of a pipeline stage runs on tp x cp x dp GPUs; the expert part runs on the
same GPUs regrouped as expert_tp (innermost) x ep x expert data parallelism, so ep * expert_tp must divide
tp * cp * dp.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from topology.errors import SpecError


class AttentionVariant(StrEnum):
    MHA = "mha"  # multi-head attention, grouped-query with num_kv_heads < heads
    MLA = "mla"  # DeepSeek's multi-head latent attention


@dataclass(frozen=True, slots=True)
class MoeShape:
    """The routed and shared experts of a MoE layer; counts, not bytes."""

    num_experts: int
    top_k: int
    ffn_hidden_size: int  # each expert's MLP hidden size
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    capacity_factor: float | None = None  # None: dropless; else each expert's buffer is padded to its capacity
    load_imbalance: float = 1.0  # the busiest expert rank's tokens over the mean


@dataclass(frozen=True, slots=True)
class MlaShape:
    q_lora_rank: int  # 0: queries from a direct hidden -> heads x (nope + rope) projection
    kv_lora_rank: int
    qk_rope_head_dim: int
    v_head_dim: int


MOE_FIELDS = ("num_experts", "moe_top_k", "moe_ffn_hidden_size", "num_shared_experts", "first_dense_layers",
              "moe_capacity_factor", "moe_load_imbalance")
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")


def moe_from_fields(fields: Mapping[str, object], num_layers: int, decoder_only: bool) -> MoeShape | None:
    """The MoE shape from contract fields, or None for a dense model; SpecError on a contradiction."""
    given = [name for name in MOE_FIELDS if fields.get(name) is not None]
    experts = fields.get("num_experts")
    if experts is None:
        if given:
            raise SpecError(f"model.{given[0]}", "applies to mixture-of-experts models only (give num_experts)")
        return None
    if not decoder_only:
        raise SpecError("model.num_experts", "mixture of experts is simulated for decoder_only models only")

    def count(name: str, default: int | None, low: int) -> int:
        value = fields.get(name, default)
        if value is None:
            raise SpecError(f"model.{name}", "is required for a mixture-of-experts model")
        number = int(value)  # type: ignore[call-overload]
        if number < low:
            raise SpecError(f"model.{name}", f"must be >= {low}")
        return number

    shape = MoeShape(
        num_experts=count("num_experts", None, 1), top_k=count("moe_top_k", None, 1),
        ffn_hidden_size=count("moe_ffn_hidden_size", None, 1),
        num_shared_experts=count("num_shared_experts", 0, 0), first_dense_layers=count("first_dense_layers", 0, 0),
        capacity_factor=float(fields["moe_capacity_factor"])  # type: ignore[arg-type]
        if fields.get("moe_capacity_factor") is not None else None,
        load_imbalance=float(fields.get("moe_load_imbalance") or 1.0))  # type: ignore[arg-type]
    if shape.top_k > shape.num_experts:
        raise SpecError("model.moe_top_k", f"must be <= num_experts ({shape.num_experts})")
    if shape.first_dense_layers >= num_layers:
        raise SpecError("model.first_dense_layers", f"must be < num_layers ({num_layers}): a MoE model needs a "
                        "MoE layer")
    if shape.capacity_factor is not None and shape.capacity_factor <= 0:
        raise SpecError("model.moe_capacity_factor", "must be > 0")
    if shape.load_imbalance < 1:
        raise SpecError("model.moe_load_imbalance", "must be >= 1 (the busiest rank over the mean)")
    return shape


def mla_from_fields(fields: Mapping[str, object]) -> MlaShape | None:
    """The MLA shape when attention_variant is mla, else None; SpecError on a contradiction."""
    variant = AttentionVariant(str(fields.get("attention_variant") or AttentionVariant.MHA))
    given = [name for name in MLA_FIELDS if fields.get(name) is not None]
    if variant is AttentionVariant.MHA:
        if given:
            raise SpecError(f"model.{given[0]}", "applies to attention_variant mla only")
        return None
    values = {}
    for name in MLA_FIELDS:
        value = fields.get(name, 0 if name == "q_lora_rank" else None)
        if value is None:
            raise SpecError(f"model.{name}", "is required with attention_variant mla")
        values[name] = int(value)  # type: ignore[call-overload]
        if values[name] < (0 if name == "q_lora_rank" else 1):
            raise SpecError(f"model.{name}", "must be >= 1" if name != "q_lora_rank" else "must be >= 0")
    return MlaShape(**values)


def validate_expert_layout(ep: int, expert_tp: int, dense_ranks: int, moe: MoeShape | None) -> None:
    """The expert layout's rules: ep and expert_tp >= 1; ep * expert_tp divides the GPUs of a pipeline stage
    (`dense_ranks` = tp * cp * dp); ep divides num_experts; a dense model takes no ep."""
    for name, value in (("ep", ep), ("expert_tp", expert_tp)):
        if value < 1:
            raise SpecError(f"layout.{name}", "must be >= 1")
    if moe is None:
        if ep > 1 or expert_tp > 1:
            raise SpecError("layout.ep" if ep > 1 else "layout.expert_tp",
                            "must be 1 for a dense model (it has no experts; give num_experts)")
        return
    if dense_ranks % (ep * expert_tp):
        raise SpecError("layout.ep", f"ep*expert_tp = {ep}*{expert_tp} must divide tp*cp*dp = {dense_ranks} "
                        "(the expert layers fold onto the same GPUs)")
    if moe.num_experts % ep:
        raise SpecError("layout.ep", f"must divide num_experts ({moe.num_experts})")
    if moe.ffn_hidden_size % expert_tp:
        raise SpecError("layout.expert_tp", f"must divide moe_ffn_hidden_size ({moe.ffn_hidden_size})")


def expert_groups(ep: int, expert_tp: int, dense_ranks: int) -> list[tuple[int, ...]]:
    """The expert-parallel groups of one pipeline stage as stage-local rank indices (tp innermost, then dp: the
    order Megatron numbers the stage's ranks in), folded as expert_tp x ep x expert-dp, expert_tp innermost."""
    edp = dense_ranks // (ep * expert_tp)
    return [tuple(et + expert_tp * (e + ep * d) for e in range(ep)) for d in range(edp) for et in range(expert_tp)]
