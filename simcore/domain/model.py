"""Model shapes (domain objects) and their validation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from simcore.domain.lora import Lora, lora_from_fields
from simcore.domain.moe import MlaShape, MoeShape, mla_from_fields, moe_from_fields
from topology.errors import SpecError


class Architecture(StrEnum):
    DECODER_ONLY = "decoder_only"
    ENCODER_DECODER = "encoder_decoder"
    ENCODER_ONLY = "encoder_only"


class AttentionKind(StrEnum):
    STANDARD = "standard"
    FLASH = "flash"


class Activation(StrEnum):
    """The MLP's activation. A pointwise kernel either way (one read and one write per element, what
    kernels.py costs); the gated ones (SwiGLU, GeGLU) need a third MLP matrix."""

    GELU = "gelu"
    RELU = "relu"
    SQUARED_RELU = "squared_relu"  # Nemotron-4 (So et al. 2021, Primer): relu(x)^2
    SWIGLU = "swiglu"
    GEGLU = "geglu"


GATED_ACTIVATIONS = (Activation.SWIGLU, Activation.GEGLU)


@dataclass(frozen=True, slots=True)
class LayerType:
    """What one transformer layer works on: `seq` tokens of its own (self-attention, causal or not, and the MLP)
    and, for a decoder layer of an encoder-decoder model, `cross_seq` encoder tokens that its cross-attention
    reads keys and values from (0: no cross-attention)."""

    kind: str  # "transformer" (GPT, BERT), "encoder" or "decoder" (T5): the stage report's layer names
    seq: int
    causal: bool
    cross_seq: int = 0
    moe: bool = False  # its MLP is the model's mixture of experts (simcore/domain/moe.py)
    bf16: bool = False  # its GEMMs run in BF16 whatever the layout's precision (layout.bf16_layers)


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
    activation: Activation | None = None  # None: not stated (gated_mlp alone says how many matrices)
    moe: MoeShape | None = None  # mixture of experts; None: every layer dense
    mla: MlaShape | None = None  # multi-head latent attention; None: multi-head (grouped-query) attention
    # Multi-token prediction depths (DeepSeek-V3 §2.2; Megatron-Core's --mtp-num-layers): each a transformer layer
    # of the last stack's type, an embedding of the shifted tokens, a 2h -> h projection and its own output head
    # (shared weights), all on the last pipeline stage (simcore/cost/mtp.py). 0: none.
    mtp_layers: int = 0
    lora: Lora | None = None  # LoRA fine-tuning (simcore/domain/lora.py): adapters on a frozen base; None: all train

    @property
    def encoder_decoder(self) -> bool:
        return self.architecture is Architecture.ENCODER_DECODER

    @property
    def tokens_per_sample(self) -> int:
        return self.seq_length + self.decoder_seq_length

    @property
    def output_seq_length(self) -> int:
        """Tokens per sample the output layer (logits and loss) works on: the target for encoder-decoder."""
        return self.decoder_seq_length if self.encoder_decoder else self.seq_length

    def encoder_layer(self) -> LayerType:
        return LayerType("encoder", self.seq_length, causal=False)

    def decoder_layer(self) -> LayerType:
        return LayerType("decoder", self.decoder_seq_length, causal=True, cross_seq=self.seq_length)

    def main_layer(self) -> LayerType:
        """The layer of a single-stack model (GPT: causal; BERT: bidirectional)."""
        return LayerType("transformer", self.seq_length, causal=self.architecture is Architecture.DECODER_ONLY)

    def layer_stacks(self) -> tuple[tuple[LayerType, int], ...]:
        """The model's layers in order, as (layer type, count) per stack: encoder then decoder for T5."""
        if self.encoder_decoder:
            return ((self.encoder_layer(), self.encoder_layers), (self.decoder_layer(), self.decoder_layers))
        if self.moe is not None:
            dense = self.moe.first_dense_layers
            moe_layer = LayerType("moe", self.seq_length, causal=True, moe=True)
            stacks = ((self.main_layer(), dense),) if dense else ()
            return (*stacks, (moe_layer, self.num_layers - dense))
        return ((self.main_layer(), self.num_layers),)

    def mtp_layer(self) -> LayerType:
        """The transformer layer of a multi-token prediction depth: the model's last layer's type."""
        return self.layer_stacks()[-1][0]

    def attention_parameters(self) -> int:
        """Weights of one self-attention block: projections and their biases (MHA/GQA), or MLA's down and up
        projections and its two latent norms."""
        h, d, a = self.hidden_size, self.head_dim, self.num_attention_heads
        if self.mla is not None:
            m = self.mla
            qk = a * (d + m.qk_rope_head_dim)
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * qk if m.q_lora_rank else h * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * a * (
                d + m.v_head_dim)
            return q + kv + a * m.v_head_dim * h
        qkv_out = (a + 2 * self.num_kv_heads) * d
        return h * qkv_out + qkv_out + a * d * h + h

    def expert_parameters(self) -> int:
        """Weights of one MoE layer's routed experts (all of them)."""
        if self.moe is None:
            return 0
        mats = 3 if self.gated_mlp else 2
        return self.moe.num_experts * mats * self.hidden_size * self.moe.ffn_hidden_size

    def parameters_per_layer(self, layer: LayerType | None = None) -> int:
        """Weights of one transformer layer: attention projections, MLP matrices, biases and norms; a decoder layer
        of an encoder-decoder model adds its cross-attention block (Q from the target, K and V from the encoder
        output, the output projection and a norm)."""
        h = self.hidden_size
        attn = self.attention_parameters()
        mlp_mats = 3 if self.gated_mlp else 2
        mlp = mlp_mats * h * self.ffn_hidden_size + self.ffn_hidden_size + h
        if layer is not None and layer.moe and self.moe is not None:
            # the router, the routed experts and the shared experts (one MLP of their summed width)
            shared = self.moe.num_shared_experts * self.moe.ffn_hidden_size
            mlp = h * self.moe.num_experts + self.expert_parameters() + mlp_mats * h * shared
        cross = attn + 2 * h if layer is not None and layer.cross_seq else 0
        return attn + mlp + 4 * h + cross

    def embedding_parameters(self) -> int:
        """Word embedding, plus learned positions for the GPT/BERT shapes (T5 uses a relative position bias of a
        few thousand weights, left out). T5 shares one word embedding between encoder and decoder."""
        positions = 0 if self.encoder_decoder else self.seq_length * self.hidden_size
        return self.vocab_size * self.hidden_size + positions

    def total_parameters(self) -> int:
        untied = 0 if self.tied_embeddings else self.vocab_size * self.hidden_size
        layers = sum(count * self.parameters_per_layer(layer) for layer, count in self.layer_stacks())
        # a multi-token prediction depth: its layer, its 2h x h projection and three norms (its embedding and
        # output head are the model's own)
        h = self.hidden_size
        mtp = self.mtp_layers * (self.parameters_per_layer(self.mtp_layer()) + 2 * h * h + 3 * h)
        return layers + self.embedding_parameters() + untied + mtp


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
    stacks = _stack_sizes(arch, fields, need)
    heads = int(need("num_attention_heads"))  # type: ignore[call-overload]
    hidden = int(need("hidden_size"))  # type: ignore[call-overload]
    kv = fields.get("num_kv_heads")
    head_dim = fields.get("head_dim")
    if head_dim is None:
        if hidden % heads:
            raise SpecError("model.num_attention_heads", f"must divide hidden_size ({hidden}) unless head_dim is given")
        head_dim = hidden // heads
    ffn = fields.get("ffn_hidden_size")
    activation = Activation(str(fields["activation"])) if fields.get("activation") is not None else None
    gated = fields.get("gated_mlp")
    if activation is not None:
        if gated is not None and bool(gated) != (activation in GATED_ACTIVATIONS):
            raise SpecError("model.activation", f"{activation} is {'' if activation in GATED_ACTIVATIONS else 'not '}"
                            f"a gated activation, but gated_mlp is {str(bool(gated)).lower()}")
        gated = activation in GATED_ACTIVATIONS
    shape = ModelShape(
        architecture=arch,
        num_layers=stacks["num_layers"],
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(kv) if kv is not None else heads,  # type: ignore[call-overload]
        head_dim=int(head_dim),  # type: ignore[call-overload]
        ffn_hidden_size=int(ffn) if ffn is not None else 4 * hidden,  # type: ignore[call-overload]
        gated_mlp=bool(gated or False),
        vocab_size=int(need("vocab_size")),  # type: ignore[call-overload]
        seq_length=int(need("seq_length")),  # type: ignore[call-overload]
        tied_embeddings=bool(fields.get("tied_embeddings", True)),
        attention=AttentionKind(str(fields.get("attention") or AttentionKind.STANDARD)),
        encoder_layers=stacks["encoder_layers"],
        decoder_layers=stacks["decoder_layers"],
        decoder_seq_length=stacks["decoder_seq_length"],
        activation=activation,
        moe=moe_from_fields(fields, stacks["num_layers"], arch is Architecture.DECODER_ONLY),
        mla=mla_from_fields(fields),
        mtp_layers=_mtp_layers(fields, arch),
    )
    for name in _INT_FIELDS:
        if getattr(shape, name) < 1:
            raise SpecError(f"model.{name}", "must be >= 1")
    if shape.num_attention_heads % shape.num_kv_heads:
        raise SpecError("model.num_kv_heads", f"must divide num_attention_heads ({heads})")
    lora = lora_from_fields(fields.get("lora"), shape)
    return shape if lora is None else replace(shape, lora=lora)


def _mtp_layers(fields: Mapping[str, object], arch: Architecture) -> int:
    value = fields.get("mtp_layers")
    if value is None or value == 0:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecError("model.mtp_layers", f"must be an integer >= 0 (given {value!r})")
    if arch is not Architecture.DECODER_ONLY:
        raise SpecError("model.mtp_layers", f"applies to decoder_only models only (this one is {arch}): "
                        "multi-token prediction predicts the next tokens of a causal model")
    return value


_ENCODER_DECODER_FIELDS = ("encoder_layers", "decoder_layers", "decoder_seq_length")


def _stack_sizes(arch: Architecture, fields: Mapping[str, object], need: Callable[[str], object]) -> dict[str, int]:
    """Layer counts and the target length: num_layers for one stack; encoder_layers, decoder_layers and
    decoder_seq_length (and num_layers = their layer sum) for an encoder-decoder model."""
    if arch is not Architecture.ENCODER_DECODER:
        for name in _ENCODER_DECODER_FIELDS:
            if fields.get(name) is not None:
                raise SpecError(f"model.{name}", f"applies to encoder_decoder models only (this one is {arch})")
        return {"num_layers": int(need("num_layers")),  # type: ignore[call-overload]
                "encoder_layers": 0, "decoder_layers": 0, "decoder_seq_length": 0}
    if fields.get("num_layers") is not None:
        raise SpecError("model.num_layers", "encoder_decoder models take encoder_layers and decoder_layers instead")
    sizes = {name: int(need(name)) for name in _ENCODER_DECODER_FIELDS}  # type: ignore[call-overload]
    for name, value in sizes.items():
        if value < 1:
            raise SpecError(f"model.{name}", "must be >= 1")
    sizes["num_layers"] = sizes["encoder_layers"] + sizes["decoder_layers"]
    return sizes
