"""Model shapes (domain objects) and their validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from topology.errors import SpecError


class Architecture(StrEnum):
    DECODER_ONLY = "decoder_only"
    ENCODER_DECODER = "encoder_decoder"
    ENCODER_ONLY = "encoder_only"


class AttentionKind(StrEnum):
    STANDARD = "standard"
    FLASH = "flash"


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A transformer's shape. Sizes are counts (layers, heads, tokens), not bytes."""

    architecture: Architecture
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_hidden_size: int
    gated_mlp: bool
    vocab_size: int
    seq_length: int
    tied_embeddings: bool
    attention: AttentionKind
    encoder_layers: int = 0
    decoder_layers: int = 0
    decoder_seq_length: int = 0

    @property
    def causal(self) -> bool:
        return self.architecture is Architecture.DECODER_ONLY

    @property
    def tokens_per_sample(self) -> int:
        return self.seq_length + self.decoder_seq_length

    def parameters_per_layer(self) -> int:
        """Weights of one transformer layer: attention projections, MLP matrices, biases and norms."""
        h, d = self.hidden_size, self.head_dim
        qkv_out = (self.num_attention_heads + 2 * self.num_kv_heads) * d
        attn = h * qkv_out + qkv_out + self.num_attention_heads * d * h + h
        mlp_mats = 3 if self.gated_mlp else 2
        mlp = mlp_mats * h * self.ffn_hidden_size + self.ffn_hidden_size + h
        return attn + mlp + 4 * h

    def embedding_parameters(self) -> int:
        """Word embedding (plus learned positions for the GPT/BERT shapes)."""
        return self.vocab_size * self.hidden_size + self.seq_length * self.hidden_size

    def total_parameters(self) -> int:
        untied = 0 if self.tied_embeddings else self.vocab_size * self.hidden_size
        return self.num_layers * self.parameters_per_layer() + self.embedding_parameters() + untied


_INT_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "ffn_hidden_size",
               "vocab_size", "seq_length")


def model_from_fields(fields: Mapping[str, object]) -> ModelShape:
    """Build a ModelShape from contract field names (a preset already merged in); raise SpecError on bad input."""

    def need(name: str) -> object:
        value = fields.get(name)
        if value is None:
            raise SpecError(f"model.{name}", "is required (give it or a preset that has it)")
        return value

    arch = Architecture(str(fields.get("architecture") or Architecture.DECODER_ONLY))
    if arch is Architecture.ENCODER_DECODER:
        raise SpecError("model.architecture", "encoder_decoder is not simulated yet; use decoder_only or encoder_only")
    heads = int(need("num_attention_heads"))  # type: ignore[call-overload]
    hidden = int(need("hidden_size"))  # type: ignore[call-overload]
    kv = fields.get("num_kv_heads")
    head_dim = fields.get("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise SpecError("model.num_attention_heads", f"must divide hidden_size ({hidden}) unless head_dim is given")
        head_dim = hidden // heads
    ffn = fields.get("ffn_hidden_size")
    shape = ModelShape(
        architecture=arch,
        num_layers=int(need("num_layers")),  # type: ignore[call-overload]
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(kv) if kv is not None else heads,  # type: ignore[call-overload]
        head_dim=int(head_dim),  # type: ignore[call-overload]
        ffn_hidden_size=int(ffn) if ffn is not None else 4 * hidden,  # type: ignore[call-overload]
        gated_mlp=bool(fields.get("gated_mlp") or False),
        vocab_size=int(need("vocab_size")),  # type: ignore[call-overload]
        seq_length=int(need("seq_length")),  # type: ignore[call-overload]
        tied_embeddings=bool(fields.get("tied_embeddings", True)),
        attention=AttentionKind(str(fields.get("attention") or AttentionKind.STANDARD)),
    )
    for name in _INT_FIELDS:
        if getattr(shape, name) < 1:
            raise SpecError(f"model.{name}", "must be >= 1")
    if shape.num_attention_heads % shape.num_kv_heads:
        raise SpecError("model.num_kv_heads", f"must divide num_attention_heads ({heads})")
    return shape
