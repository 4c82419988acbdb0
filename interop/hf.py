"""A Hugging Face `config.json` -> the request's `model` fields, by its `architectures` entry.

Key names are those of the transformers configuration classes (LlamaConfig, MistralConfig, MixtralConfig,
Qwen2Config, Qwen2MoeConfig, Qwen3Config, Qwen3MoeConfig, DeepseekV2Config, DeepseekV3Config, GptOssConfig,
T5Config, BertConfig, GPT2Config, GPTNeoXConfig in huggingface/transformers src/transformers/models/*/
configuration_*.py); defaults where a key is absent are those classes' defaults. Every key that is neither mapped
nor read is returned in `ignored` with its value; a key that would change the simulated figures and that the model
cannot represent (a dense layer every other layer, an activation the cost model lacks) is a RequestError naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api_schemas import RequestError

__all__ = ["ARCHITECTURES", "HfModel", "model_from_hf"]


@dataclass(frozen=True, slots=True)
class HfModel:
    """What a config.json gives: the model fields, the keys left out (with their values) and the values assumed
    where the config says nothing (the training sequence length, above all)."""

    fields: dict[str, Any]
    ignored: dict[str, Any] = field(default_factory=dict)
    assumed: dict[str, Any] = field(default_factory=dict)


class _Reader:
    """Reads keys of one config, remembering which it read; `where` prefixes the field named in errors."""

    def __init__(self, config: Mapping[str, Any], where: str) -> None:
        self.config, self.where, self.read = config, where, {"architectures", "model_type"}

    def error(self, key: str, rule: str) -> RequestError:
        return RequestError.for_field(f"{self.where}.{key}", rule)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        value = self.config.get(key, default)
        return default if value is None else value

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.get(key, default)
        if value is None:
            raise self.error(key, "is required for this architecture")
        if type(value) is not int or value < 0:
            raise self.error(key, f"must be an integer >= 0 (given {value!r})")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if type(value) is not bool:
            raise self.error(key, f"must be true or false (given {value!r})")
        return value

    def expect(self, key: str, allowed: tuple[Any, ...], why: str) -> None:
        """A key whose other values change the answer in a way the simulator cannot represent."""
        value = self.get(key, allowed[0])
        if value not in allowed:
            raise self.error(key, f"{value!r} is not supported: {why}")


# The MLP activations the cost model knows, by transformers' ACT2FN names: silu/swish in a gated (SwiGLU) MLP.
_GATED = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_new": "geglu", "gelu_pytorch_tanh": "geglu"}
_PLAIN = {"gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu",
          "quick_gelu": "gelu"}


def _activation(r: _Reader, key: str, default: str, gated: bool) -> str:
    name = r.get(key, default)
    table = _GATED if gated else _PLAIN
    if name not in table:
        raise r.error(key, f"activation {name!r} is not one the cost model has (known: {', '.join(sorted(table))})")
    return table[name]


def _decoder(r: _Reader, tied_default: bool) -> dict[str, Any]:
    """The keys Llama, Mistral, Qwen2/3 and their MoE variants share (LlamaConfig's names)."""
    heads = r.integer("num_attention_heads")
    hidden = r.integer("hidden_size")
    fields: dict[str, Any] = {
        "architecture": "decoder_only",
        "num_layers": r.integer("num_hidden_layers"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": r.integer("num_key_value_heads", heads),
        "head_dim": r.integer("head_dim", hidden // heads),
        "ffn_hidden_size": r.integer("intermediate_size"),
        "vocab_size": r.integer("vocab_size"),
        "tied_embeddings": r.boolean("tie_word_embeddings", tied_default),
        "activation": _activation(r, "hidden_act", "silu", gated=True),
    }
    if r.get("use_sliding_window", False) is True and r.get("sliding_window") is not None:
        raise r.error("use_sliding_window", "sliding-window attention is not supported (its attention cost differs)")
    return fields


def _llama(r: _Reader) -> dict[str, Any]:
    return _decoder(r, tied_default=False)


def _mistral(r: _Reader) -> dict[str, Any]:
    fields = _decoder(r, tied_default=False)
    if r.get("sliding_window") is not None:  # MistralConfig: every layer attends to a window
        raise r.error("sliding_window", "sliding-window attention is not supported (its attention cost differs)")
    return fields


def _mixtral(r: _Reader) -> dict[str, Any]:
    fields = _mistral(r)
    fields.update(num_experts=r.integer("num_local_experts", 8), moe_top_k=r.integer("num_experts_per_tok", 2),
                  moe_ffn_hidden_size=fields["ffn_hidden_size"])
    return fields


def _qwen2(r: _Reader) -> dict[str, Any]:
    return _decoder(r, tied_default=False)


def _qwen_moe(r: _Reader, shared: bool) -> dict[str, Any]:
    fields = _decoder(r, tied_default=False)
    r.expect("decoder_sparse_step", (1,), "only every layer being a MoE layer is represented")
    r.expect("mlp_only_layers", ([],), "dense layers between MoE layers are not represented")
    moe_ffn = r.integer("moe_intermediate_size")
    fields.update(num_experts=r.integer("num_experts"), moe_top_k=r.integer("num_experts_per_tok"),
                  moe_ffn_hidden_size=moe_ffn)
    if shared:  # Qwen2-MoE: one shared expert of shared_expert_intermediate_size (a multiple of the experts' size)
        size = r.integer("shared_expert_intermediate_size", 0)
        if size % moe_ffn:
            raise r.error("shared_expert_intermediate_size",
                          f"must be a multiple of moe_intermediate_size ({moe_ffn}): shared experts are counted in "
                          "experts of that size")
        fields["num_shared_experts"] = size // moe_ffn
    return fields


def _deepseek(r: _Reader) -> dict[str, Any]:
    fields = _decoder(r, tied_default=False)
    r.expect("moe_layer_freq", (1,), "only a MoE layer after every leading dense layer is represented")
    fields.pop("head_dim")
    fields.update(
        num_experts=r.integer("n_routed_experts"), moe_top_k=r.integer("num_experts_per_tok"),
        moe_ffn_hidden_size=r.integer("moe_intermediate_size"), num_shared_experts=r.integer("n_shared_experts", 0),
        first_dense_layers=r.integer("first_k_dense_replace", 0), attention_variant="mla",
        q_lora_rank=r.integer("q_lora_rank", 0), kv_lora_rank=r.integer("kv_lora_rank"),
        qk_rope_head_dim=r.integer("qk_rope_head_dim"), head_dim=r.integer("qk_nope_head_dim"),
        v_head_dim=r.integer("v_head_dim"),
    )
    # DeepSeek-V3's multi-token prediction modules (the checkpoint's layers after num_hidden_layers; the config
    # class has no default, so absent is none): each a transformer layer, a projection and an output head
    depths = r.integer("num_nextn_predict_layers", 0)
    if depths:
        fields["mtp_layers"] = depths
    return fields


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    fields = _decoder(r, tied_default=False)  # GptOssConfig: gated SwiGLU experts (hidden_act "silu")
    fields.update(num_experts=r.integer("num_local_experts"), moe_top_k=r.integer("num_experts_per_tok"),
                  moe_ffn_hidden_size=fields["ffn_hidden_size"])
    return fields


def _t5(r: _Reader) -> dict[str, Any]:
    proj = r.get("feed_forward_proj", "relu")
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    layers = r.integer("num_layers", 6)
    if act not in (_GATED if gated else _PLAIN):
        raise r.error("feed_forward_proj", f"{proj!r} is not an MLP the cost model has (relu, gelu, gated-gelu)")
    return {
        "architecture": "encoder_decoder",
        "encoder_layers": layers,
        "decoder_layers": r.integer("num_decoder_layers", layers),
        "hidden_size": r.integer("d_model", 512),
        "num_attention_heads": r.integer("num_heads", 8),
        "head_dim": r.integer("d_kv", 64),
        "ffn_hidden_size": r.integer("d_ff", 2048),
        "vocab_size": r.integer("vocab_size", 32128),
        "tied_embeddings": r.boolean("tie_word_embeddings", True),
        "activation": (_GATED if gated else _PLAIN)[act],
    }


def _bert(r: _Reader) -> dict[str, Any]:
    return {
        "architecture": "encoder_only",
        "num_layers": r.integer("num_hidden_layers", 12),
        "hidden_size": r.integer("hidden_size", 768),
        "num_attention_heads": r.integer("num_attention_heads", 12),
        "ffn_hidden_size": r.integer("intermediate_size", 3072),
        "vocab_size": r.integer("vocab_size", 30522),
        "tied_embeddings": r.boolean("tie_word_embeddings", True),
        "activation": _activation(r, "hidden_act", "gelu", gated=False),
        "seq_length": r.integer("max_position_embeddings", 512),
    }


def _gpt2(r: _Reader) -> dict[str, Any]:
    hidden = r.integer("n_embd", 768)
    return {
        "architecture": "decoder_only",
        "num_layers": r.integer("n_layer", 12),
        "hidden_size": hidden,
        "num_attention_heads": r.integer("n_head", 12),
        "ffn_hidden_size": r.integer("n_inner", 4 * hidden),
        "vocab_size": r.integer("vocab_size", 50257),
        "tied_embeddings": r.boolean("tie_word_embeddings", True),
        "activation": _activation(r, "activation_function", "gelu_new", gated=False),
        "seq_length": r.integer("n_positions", 1024),
    }


def _neox(r: _Reader) -> dict[str, Any]:
    return {
        "architecture": "decoder_only",
        "num_layers": r.integer("num_hidden_layers", 44),
        "hidden_size": r.integer("hidden_size", 6144),
        "num_attention_heads": r.integer("num_attention_heads", 64),
        "ffn_hidden_size": r.integer("intermediate_size", 24576),
        "vocab_size": r.integer("vocab_size", 50432),
        "tied_embeddings": r.boolean("tie_word_embeddings", False),
        "activation": _activation(r, "hidden_act", "gelu", gated=False),
    }


# `architectures[0]` -> its mapping (the model classes transformers registers for each configuration).
ARCHITECTURES: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _mistral,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen2,
    "Qwen3ForCausalLM": _qwen2,
    "Qwen2MoeForCausalLM": lambda r: _qwen_moe(r, shared=True),
    "Qwen3MoeForCausalLM": lambda r: _qwen_moe(r, shared=False),
    "DeepseekV2ForCausalLM": _deepseek,
    "DeepseekV3ForCausalLM": _deepseek,
    "GptOssForCausalLM": _gpt_oss,
    "T5ForConditionalGeneration": _t5,
    "MT5ForConditionalGeneration": _t5,
    "T5Model": _t5,
    "BertForMaskedLM": _bert,
    "BertForPreTraining": _bert,
    "BertModel": _bert,
    "GPT2LMHeadModel": _gpt2,
    "GPT2Model": _gpt2,
    "GPTNeoXForCausalLM": _neox,
}

# Sequence lengths a config does not hold: T5 has relative positions (no maximum); the T5 presets' 512 in, 128 out.
_T5_SEQ = (512, 128)


def model_from_hf(config: Any, where: str = "model.hf_config") -> HfModel:
    """The model fields of one config.json document; RequestError (field `where`.key) for what cannot be mapped.

    The training sequence length is not part of a config: `seq_length` is its `max_position_embeddings` (or
    GPT-2's `n_positions`, T5's 512 in and 128 out), listed in `assumed`; a request sets its own beside it.
    """
    if not isinstance(config, Mapping):
        raise RequestError.for_field(where, "must be a config.json mapping")
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise RequestError.for_field(f"{where}.architectures", "must be a list naming the model class, e.g. "
                                     "[\"LlamaForCausalLM\"]")
    mapping = ARCHITECTURES.get(names[0])
    if mapping is None:
        raise RequestError.for_field(f"{where}.architectures", f"{names[0]!r} is not a supported architecture "
                                     f"(supported: {', '.join(ARCHITECTURES)})")
    reader = _Reader(config, where)
    fields = mapping(reader)
    assumed: dict[str, Any] = {}
    if fields["architecture"] == "encoder_decoder":
        assumed = {"seq_length": _T5_SEQ[0], "decoder_seq_length": _T5_SEQ[1]}
    elif "seq_length" not in fields:
        assumed = {"seq_length": reader.integer("max_position_embeddings")}
    else:
        assumed = {"seq_length": fields.pop("seq_length")}
    ignored = {key: config[key] for key in sorted(config) if key not in reader.read}
    return HfModel(fields=fields, ignored=ignored, assumed=assumed)
