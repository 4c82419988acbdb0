"""Model presets: published transformer shapes, as the contract's ``model`` fields.

``MODEL_PRESETS`` maps a preset name (the list in ``contract.md``) to a plain dict of the contract's model
fields (``architecture``, ``num_layers`` or ``encoder_layers``/``decoder_layers``, ``hidden_size``,
``num_attention_heads``, ``num_kv_heads``, ``head_dim`` where it differs from hidden/heads or is T5's
``d_kv``, ``ffn_hidden_size``, ``gated_mlp``, ``vocab_size``, ``seq_length``, ``decoder_seq_length`` for
encoder-decoder models, ``tied_embeddings``, ``attention``). ``MODEL_PRESET_SOURCES`` names, in one line
per preset, where its shape comes from.

Plain data only: no validation and no I/O here. The request schema validates these dicts and applies any
fields a user gives beside a preset on top of them. Callers should copy a preset before changing it.
"""

from __future__ import annotations

from simcore.domain.moe_presets import MOE_MODEL_PRESETS, MOE_PRESET_SOURCES

# Megatron pads GPT-2/GPT-3's BPE vocabulary (50257) to 51200, a multiple of 128 x TP; the Narayanan'21
# table states vocab 51200 for every row, and we use the same padded size for the GPT-3 family.
_MEGATRON_PADDED_GPT_VOCAB = 51200
# T5's SentencePiece vocabulary is 32000 plus 100 sentinel ids, padded to 32128 in the released configs.
_T5_VOCAB = 32128
# mT5: 250k mC4 SentencePiece vocabulary plus 100 extra ids (t5x mt5 gin).
_MT5_VOCAB = 250112
_LLAMA2_VOCAB = 32000  # [unverified] in the reference notes; matches the released Llama-2 tokenizer.
_LLAMA3_VOCAB = 128256
_NEMOTRON4_VOCAB = 256000  # dgxc-benchmarking v24.11.1 nemotron/README_15b.md FLOP notes (modern reference)


def _gpt(
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    *,
    vocab_size: int = _MEGATRON_PADDED_GPT_VOCAB,
    seq_length: int = 2048,
    ffn_hidden_size: int | None = None,
) -> dict[str, object]:
    """A GPT-2/3 style decoder: plain GeLU MLP of 4h, tied embeddings, learned positions, MHA."""
    return {
        "architecture": "decoder_only",
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "num_attention_heads": num_attention_heads,
        "num_kv_heads": num_attention_heads,
        "ffn_hidden_size": ffn_hidden_size if ffn_hidden_size is not None else 4 * hidden_size,
        "gated_mlp": False,
        "vocab_size": vocab_size,
        "seq_length": seq_length,
        "tied_embeddings": True,
        "attention": "standard",
    }


def _llama(
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    ffn_hidden_size: int,
    *,
    vocab_size: int,
    seq_length: int,
) -> dict[str, object]:
    """A Llama decoder: SwiGLU MLP (three matrices), untied embeddings, RoPE, flash attention."""
    return {
        "architecture": "decoder_only",
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "num_attention_heads": num_attention_heads,
        "num_kv_heads": num_kv_heads,
        "ffn_hidden_size": ffn_hidden_size,
        "gated_mlp": True,
        "vocab_size": vocab_size,
        "seq_length": seq_length,
        "tied_embeddings": False,
        "attention": "flash",
    }


def _nemotron4(num_layers: int, hidden_size: int, num_attention_heads: int, num_kv_heads: int,
               ffn_hidden_size: int) -> dict[str, object]:
    """A Nemotron-4 decoder (NeMo NemotronConfig): squared-ReLU MLP of two matrices, untied embeddings, RoPE,
    grouped-query attention, no biases, sequence 4096; TE's fused (flash) attention."""
    return {
        "architecture": "decoder_only",
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "num_attention_heads": num_attention_heads,
        "num_kv_heads": num_kv_heads,
        "ffn_hidden_size": ffn_hidden_size,
        "gated_mlp": False,
        "activation": "squared_relu",
        "vocab_size": _NEMOTRON4_VOCAB,
        "seq_length": 4096,
        "tied_embeddings": False,
        "attention": "flash",
    }


def _t5(
    layers: int,
    hidden_size: int,
    num_attention_heads: int,
    head_dim: int,
    ffn_hidden_size: int,
    *,
    gated_mlp: bool,
    tied_embeddings: bool,
    vocab_size: int = _T5_VOCAB,
    seq_length: int = 512,
    decoder_seq_length: int = 128,
) -> dict[str, object]:
    """A T5 encoder-decoder with as many decoder as encoder layers; head_dim is T5's d_kv."""
    return {
        "architecture": "encoder_decoder",
        "encoder_layers": layers,
        "decoder_layers": layers,
        "hidden_size": hidden_size,
        "num_attention_heads": num_attention_heads,
        "num_kv_heads": num_attention_heads,
        "head_dim": head_dim,
        "ffn_hidden_size": ffn_hidden_size,
        "gated_mlp": gated_mlp,
        "vocab_size": vocab_size,
        "seq_length": seq_length,
        "decoder_seq_length": decoder_seq_length,
        "tied_embeddings": tied_embeddings,
        # The T5 releases predate flash attention; a user can override this per request.
        "attention": "standard",
    }


def _bert(
    num_layers: int, hidden_size: int, num_attention_heads: int, ffn_hidden_size: int
) -> dict[str, object]:
    """A BERT encoder: GeLU MLP, MLM head tied to the word embeddings, 512 positions."""
    return {
        "architecture": "encoder_only",
        "num_layers": num_layers,
        "hidden_size": hidden_size,
        "num_attention_heads": num_attention_heads,
        "num_kv_heads": num_attention_heads,
        "ffn_hidden_size": ffn_hidden_size,
        "gated_mlp": False,
        "vocab_size": 30522,
        "seq_length": 512,
        "tied_embeddings": True,
        "attention": "standard",
    }


MODEL_PRESETS: dict[str, dict[str, object]] = {
    # ---- GPT-3 family (Brown et al. 2020, Table 2.1): layers / d_model / heads; ffn 4h; context 2048.
    "gpt3-125m": _gpt(12, 768, 12),
    "gpt3-350m": _gpt(24, 1024, 16),
    "gpt3-760m": _gpt(24, 1536, 16),
    # Assumption: Table 2.1 lists 24 heads with d_head 128 for XL, which does not multiply out to
    # d_model 2048 (2048/24 is not an integer). We keep d_head 128 and d_model 2048, hence 16 heads,
    # as Megatron/NeMo and GPT-Neo 1.3B configs do; the parameter count (~1.3B) is unchanged.
    "gpt3-1.3b": _gpt(24, 2048, 16),
    "gpt3-2.7b": _gpt(32, 2560, 32),
    "gpt3-6.7b": _gpt(32, 4096, 32),
    # Table 2.1 prints d_model 5140; 40 heads x d_head 128 = 5120, the value used in practice.
    "gpt3-13b": _gpt(40, 5120, 40),
    "gpt3-175b": _gpt(96, 12288, 96),
    # ---- Narayanan et al. SC'21 Table 1 (vocab 51200, seq 2048, ffn 4h). Heads per row are from the
    # paper's table as transcribed in the reference notes (marked unverified there; 530B and 1T are
    # confirmed by calculon's model files).
    "megatron-1.7b": _gpt(24, 2304, 24),
    "megatron-3.6b": _gpt(30, 3072, 32),
    "megatron-7.5b": _gpt(36, 4096, 32),
    "megatron-18b": _gpt(40, 6144, 48),
    "megatron-39b": _gpt(48, 8192, 64),
    "megatron-76b": _gpt(60, 10240, 80),
    "megatron-145b": _gpt(80, 12288, 96),
    "megatron-310b": _gpt(96, 16384, 128),
    "megatron-530b": _gpt(105, 20480, 128),
    "gpt-1t": _gpt(128, 25600, 160),
    # ---- Comparison pair defined by the encoder-decoder issue: a ~101B GPT and a ~106B T5 of the same
    # width (h 10240, 80 heads of 128, ffn 40960).
    "gpt-100b": _gpt(80, 10240, 80, ffn_hidden_size=40960),
    "t5-100b": _t5(
        36,
        10240,
        80,
        128,
        40960,
        gated_mlp=False,
        tied_embeddings=True,
        seq_length=1024,
        decoder_seq_length=1024,
    ),
    # ---- T5 v1.0 (google-research/text-to-text-transfer-transformer gin configs): ReLU MLP, tied
    # embeddings, d_model / d_ff / heads / d_kv / layers per stack. Sequence lengths 512 inputs / 128
    # targets follow the T5 fine-tuning setups (an assumption: pre-training used 512 / 114).
    "t5-small": _t5(6, 512, 8, 64, 2048, gated_mlp=False, tied_embeddings=True),
    "t5-base": _t5(12, 768, 12, 64, 3072, gated_mlp=False, tied_embeddings=True),
    "t5-large": _t5(24, 1024, 16, 64, 4096, gated_mlp=False, tied_embeddings=True),
    "t5-3b": _t5(24, 1024, 32, 128, 16384, gated_mlp=False, tied_embeddings=True),
    "t5-11b": _t5(24, 1024, 128, 128, 65536, gated_mlp=False, tied_embeddings=True),
    # ---- T5 v1.1: gated-GELU MLP, untied embeddings, d_kv 64.
    "t5-v1_1-xl": _t5(24, 2048, 32, 64, 5120, gated_mlp=True, tied_embeddings=False),
    "t5-v1_1-xxl": _t5(24, 4096, 64, 64, 10240, gated_mlp=True, tied_embeddings=False),
    # mT5-XXL: the T5 v1.1 XXL shape with the 250k vocabulary. Sequence lengths 512/128 are an
    # assumption kept equal to the other T5 presets (mT5 pre-training used 1024 inputs).
    "mt5-xxl": _t5(24, 4096, 64, 64, 10240, gated_mlp=True, tied_embeddings=False, vocab_size=_MT5_VOCAB),
    # ---- BERT (Devlin et al. 2019): WordPiece vocab 30522, 512 positions.
    "bert-base": _bert(12, 768, 12, 3072),
    "bert-large": _bert(24, 1024, 16, 4096),
    # ---- Llama 2 (seq 4096, vocab 32000) and Llama 3 / 3.1 (seq 8192 before the long-context stage,
    # vocab 128256): SwiGLU, untied, grouped-query attention with 8 KV heads except Llama-2 7B (MHA).
    "llama2-7b": _llama(32, 4096, 32, 32, 11008, vocab_size=_LLAMA2_VOCAB, seq_length=4096),
    "llama2-70b": _llama(80, 8192, 64, 8, 28672, vocab_size=_LLAMA2_VOCAB, seq_length=4096),
    "llama3-8b": _llama(32, 4096, 32, 8, 14336, vocab_size=_LLAMA3_VOCAB, seq_length=8192),
    "llama3-70b": _llama(80, 8192, 64, 8, 28672, vocab_size=_LLAMA3_VOCAB, seq_length=8192),
    # The published 405B has 8 KV heads (NeMo's yaml uses 16 query groups; we follow the model card).
    "llama3-405b": _llama(126, 16384, 128, 8, 53248, vocab_size=_LLAMA3_VOCAB, seq_length=8192),
    # ---- Nemotron-4 (NeMo nemotron.py Nemotron4Config15B / Nemotron4Config340B): layers / hidden / heads /
    # query groups / ffn. Llama 3.1 405B has Llama 3 405B's shape (only the context stage differs): no preset.
    "nemotron4-15b": _nemotron4(32, 6144, 48, 8, 24576),
    "nemotron4-340b": _nemotron4(96, 18432, 96, 8, 73728),
    **MOE_MODEL_PRESETS,
}


MODEL_PRESET_SOURCES: dict[str, str] = {
    "gpt3-125m": "Brown et al. 2020 Table 2.1 (GPT-3 Small); vocab padded to 51200 as Megatron does",
    "gpt3-350m": "Brown et al. 2020 Table 2.1 (GPT-3 Medium); vocab padded to 51200 as Megatron does",
    "gpt3-760m": "Brown et al. 2020 Table 2.1 (GPT-3 Large); vocab padded to 51200 as Megatron does",
    "gpt3-1.3b": "Brown et al. 2020 Table 2.1 (GPT-3 XL), 16 heads of 128 as Megatron/NeMo configs use",
    "gpt3-2.7b": "Brown et al. 2020 Table 2.1 (GPT-3 2.7B); vocab padded to 51200 as Megatron does",
    "gpt3-6.7b": "Brown et al. 2020 Table 2.1 (GPT-3 6.7B); vocab padded to 51200 as Megatron does",
    "gpt3-13b": "Brown et al. 2020 Table 2.1 (GPT-3 13B, d_model 5120 = 40 x 128)",
    "gpt3-175b": "Brown et al. 2020 Table 2.1 (GPT-3 175B); vocab padded to 51200 as Megatron does",
    "megatron-1.7b": "Narayanan et al. SC'21 Table 1 (1.7B row)",
    "megatron-3.6b": "Narayanan et al. SC'21 Table 1 (3.6B row)",
    "megatron-7.5b": "Narayanan et al. SC'21 Table 1 (7.5B row)",
    "megatron-18b": "Narayanan et al. SC'21 Table 1 (18.4B row)",
    "megatron-39b": "Narayanan et al. SC'21 Table 1 (39.1B row)",
    "megatron-76b": "Narayanan et al. SC'21 Table 1 (76.1B row)",
    "megatron-145b": "Narayanan et al. SC'21 Table 1 (145.6B row)",
    "megatron-310b": "Narayanan et al. SC'21 Table 1 (310.1B row)",
    "megatron-530b": "Narayanan et al. SC'21 Table 1 (529.6B row); calculon models/turing-530B.json",
    "gpt-1t": "Narayanan et al. SC'21 Table 1 (1008B row); calculon models/megatron-1T.json",
    "gpt-100b": "clustersim encoder-decoder issue: GPT side of the ~100B GPT vs T5 comparison",
    "t5-100b": "clustersim encoder-decoder issue: T5 side of the ~100B GPT vs T5 comparison",
    "t5-small": "google-research T5 gin configs (v1.0 small)",
    "t5-base": "google-research T5 gin configs (v1.0 base)",
    "t5-large": "google-research T5 gin configs (v1.0 large)",
    "t5-3b": "google-research T5 gin configs (v1.0 3B)",
    "t5-11b": "google-research T5 gin configs (v1.0 11B)",
    "t5-v1_1-xl": "google-research T5 v1.1 gin configs (xl)",
    "t5-v1_1-xxl": "google-research T5 v1.1 gin configs (xxl)",
    "mt5-xxl": "google-research t5x contrib/gpu/t5/mt5/xxl.gin (mT5-XXL)",
    "bert-base": "Devlin et al. 2019 (BERT-Base, uncased WordPiece vocab 30522)",
    "bert-large": "Devlin et al. 2019 (BERT-Large, uncased WordPiece vocab 30522)",
    "llama2-7b": "Touvron et al. 2023 Llama 2; NeMo-Framework-Launcher llama2_7b.yaml",
    "llama2-70b": "Touvron et al. 2023 Llama 2; NeMo-Framework-Launcher llama2_70b.yaml",
    "llama3-8b": "Meta Llama 3 paper (Dubey et al. 2024) Table 3; NeMo llama3_8b.yaml",
    "llama3-70b": "Meta Llama 3 paper (Dubey et al. 2024) Table 3; NeMo llama3_70b.yaml",
    "llama3-405b": "Meta Llama 3 paper (Dubey et al. 2024) Table 3 (8 KV heads)",
    "nemotron4-15b": "NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py @8cfedd7203 (Nemotron4Config15B, "
                     "squared ReLU, untied); vocab 256000 from dgxc-benchmarking v24.11.1 FLOP notes",
    "nemotron4-340b": "NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py (Nemotron4Config340B, squared ReLU, "
                      "untied); vocab 256000 as Nemotron-4 15B",
    **MOE_PRESET_SOURCES,
}
