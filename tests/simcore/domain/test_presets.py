"""Model presets: every contract name is present, sourced, well-formed, and has the published size."""

from __future__ import annotations

import pytest

from simcore.domain.presets import MODEL_PRESET_SOURCES, MODEL_PRESETS

# The model presets the contract lists, spelled out so that a rename or a dropped preset fails here.
CONTRACT_MODEL_PRESETS = [
    "gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b",
    "megatron-1.7b", "megatron-3.6b", "megatron-7.5b", "megatron-18b", "megatron-39b", "megatron-76b",
    "megatron-145b", "megatron-310b", "megatron-530b", "gpt-1t",
    "gpt-100b", "t5-100b",
    "t5-small", "t5-base", "t5-large", "t5-3b", "t5-11b", "t5-v1_1-xl", "t5-v1_1-xxl", "mt5-xxl",
    "bert-base", "bert-large", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b",
    "nemotron4-15b", "nemotron4-340b",
    "mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b",
]  # fmt: skip

CONTRACT_MODEL_FIELDS = {
    "architecture", "num_layers", "encoder_layers", "decoder_layers", "hidden_size", "num_attention_heads",
    "num_kv_heads", "head_dim", "ffn_hidden_size", "gated_mlp", "vocab_size", "seq_length",
    "decoder_seq_length", "tied_embeddings", "attention", "activation",
    "num_experts", "moe_top_k", "moe_ffn_hidden_size", "num_shared_experts", "first_dense_layers",
    "moe_capacity_factor", "moe_load_imbalance", "attention_variant", "q_lora_rank", "kv_lora_rank",
    "qk_rope_head_dim", "v_head_dim",
}  # fmt: skip

INT_FIELDS = {
    "num_layers", "encoder_layers", "decoder_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
    "head_dim", "ffn_hidden_size", "vocab_size", "seq_length", "decoder_seq_length",
    "num_experts", "moe_top_k", "moe_ffn_hidden_size", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
    "v_head_dim",
}  # fmt: skip
BOOL_FIELDS = {"gated_mlp", "tied_embeddings"}


# ---------------------------------------------------------------------------------------------------
# A small parameter counter, independent of the simulator's own model code.


def _attention_params(m: dict[str, object]) -> int:
    """Q and O project h <-> heads*head_dim; K and V project h -> kv_heads*head_dim (GQA)."""
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    heads = int(m["num_attention_heads"])  # type: ignore[call-overload]
    kv = int(m.get("num_kv_heads", heads))  # type: ignore[call-overload]
    d = int(m.get("head_dim", h // heads))  # type: ignore[call-overload]
    return 2 * h * heads * d + 2 * h * kv * d


def _mlp_params(m: dict[str, object]) -> int:
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    ffn = int(m["ffn_hidden_size"])  # type: ignore[call-overload]
    return (3 if m["gated_mlp"] else 2) * h * ffn


def _small_params(m: dict[str, object]) -> int:
    """Biases and norms per layer: 13h for a GPT layer (Narayanan Eq. 2); 2h (two RMSNorms) for gated ones."""
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    return 2 * h if m["gated_mlp"] else 13 * h


def _embedding_params(m: dict[str, object]) -> int:
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    v = int(m["vocab_size"])  # type: ignore[call-overload]
    return v * h * (1 if m["tied_embeddings"] else 2)


def count_params(m: dict[str, object], *, learned_positions: bool = False) -> int:
    """Parameter count: per-layer matrices and small terms, plus the embedding (twice if untied)."""
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    attn, mlp, small = _attention_params(m), _mlp_params(m), _small_params(m)
    if m["architecture"] == "encoder_decoder":
        enc = int(m["encoder_layers"])  # type: ignore[call-overload]
        dec = int(m["decoder_layers"])  # type: ignore[call-overload]
        # Encoder layer: self-attention + MLP. Decoder layer: self-attention + cross-attention + MLP.
        layers = enc * (attn + mlp + small) + dec * (2 * attn + mlp + small)
    else:
        layers = int(m["num_layers"]) * (attn + mlp + small)  # type: ignore[call-overload]
    total = layers + _embedding_params(m)
    if learned_positions:
        total += int(m["seq_length"]) * h  # type: ignore[call-overload]
    return total


def narayanan_eq2(m: dict[str, object]) -> float:
    """Narayanan et al. SC'21 Eq. 2: P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h))."""
    l_ = int(m["num_layers"])  # type: ignore[call-overload]
    h = int(m["hidden_size"])  # type: ignore[call-overload]
    v = int(m["vocab_size"])  # type: ignore[call-overload]
    s = int(m["seq_length"])  # type: ignore[call-overload]
    return 12 * l_ * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l_ * h))


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


# ---------------------------------------------------------------------------------------------------
# Presence, sources, shape of the data.


def test_contract_presets_present_and_nothing_else():
    assert len(set(CONTRACT_MODEL_PRESETS)) == len(CONTRACT_MODEL_PRESETS)
    missing = set(CONTRACT_MODEL_PRESETS) - MODEL_PRESETS.keys()
    assert not missing, f"missing presets: {sorted(missing)}"
    extra = MODEL_PRESETS.keys() - set(CONTRACT_MODEL_PRESETS)
    assert not extra, f"presets not in the contract (add them there first): {sorted(extra)}"


@pytest.mark.parametrize("name", CONTRACT_MODEL_PRESETS)
def test_every_preset_has_a_source(name):
    assert name in MODEL_PRESET_SOURCES
    source = MODEL_PRESET_SOURCES[name]
    assert isinstance(source, str) and source.strip()
    assert "\n" not in source


def test_no_source_without_a_preset():
    assert MODEL_PRESET_SOURCES.keys() == MODEL_PRESETS.keys()


@pytest.mark.parametrize("name", CONTRACT_MODEL_PRESETS)
def test_fields_are_contract_fields_with_valid_values(name):
    m = MODEL_PRESETS[name]
    assert set(m) <= CONTRACT_MODEL_FIELDS, sorted(set(m) - CONTRACT_MODEL_FIELDS)
    assert "preset" not in m
    for field in INT_FIELDS & m.keys():
        value = m[field]
        assert type(value) is int, f"{name}.{field} is {type(value).__name__}"
        assert value >= 1, f"{name}.{field} = {value}"
    for field in BOOL_FIELDS:
        assert type(m[field]) is bool, f"{name}.{field}"
    assert m["attention"] in ("standard", "flash")
    assert m["architecture"] in ("decoder_only", "encoder_decoder", "encoder_only")


@pytest.mark.parametrize("name", CONTRACT_MODEL_PRESETS)
def test_required_fields_given_explicitly(name):
    m = MODEL_PRESETS[name]
    common = {
        "architecture", "hidden_size", "num_attention_heads", "num_kv_heads", "ffn_hidden_size", "gated_mlp",
        "vocab_size", "seq_length", "tied_embeddings", "attention",
    }  # fmt: skip
    assert common <= m.keys(), sorted(common - m.keys())
    if m["architecture"] == "encoder_decoder":
        assert {"encoder_layers", "decoder_layers", "decoder_seq_length"} <= m.keys()
        assert "num_layers" not in m
        assert "head_dim" in m  # T5's d_kv is always stated
    else:
        assert "num_layers" in m
        assert not {"encoder_layers", "decoder_layers", "decoder_seq_length"} & m.keys()


@pytest.mark.parametrize("name", CONTRACT_MODEL_PRESETS)
def test_heads_divide(name):
    m = MODEL_PRESETS[name]
    h, heads, kv = m["hidden_size"], m["num_attention_heads"], m["num_kv_heads"]
    if "head_dim" not in m:
        assert h % heads == 0, f"{name}: hidden {h} not divisible by {heads} heads"  # type: ignore[operator]
    assert heads % kv == 0, f"{name}: {heads} heads not a multiple of {kv} KV heads"  # type: ignore[operator]
    assert kv <= heads  # type: ignore[operator]


def test_families():
    for name in CONTRACT_MODEL_PRESETS:
        m = MODEL_PRESETS[name]
        if name.startswith(("gpt3-", "megatron-", "gpt-")) and not name.startswith("gpt-oss"):
            assert m["architecture"] == "decoder_only"
            assert m["vocab_size"] == 51200 and m["seq_length"] == 2048
            assert m["tied_embeddings"] is True and m["gated_mlp"] is False
            assert m["attention"] == "standard"
        if name.startswith(("gpt3-", "megatron-")) or name == "gpt-1t":
            assert m["ffn_hidden_size"] == 4 * m["hidden_size"]  # type: ignore[operator]
        if name.startswith("llama"):
            assert m["gated_mlp"] is True and m["tied_embeddings"] is False and m["attention"] == "flash"
            assert m["vocab_size"] == (32000 if name.startswith("llama2") else 128256)
            assert m["seq_length"] == (4096 if name.startswith("llama2") else 8192)
        if name.startswith("bert"):
            assert m["architecture"] == "encoder_only" and m["vocab_size"] == 30522
    for name in ("t5-small", "t5-base", "t5-large", "t5-3b", "t5-11b"):
        m = MODEL_PRESETS[name]
        assert m["gated_mlp"] is False and m["tied_embeddings"] is True and m["vocab_size"] == 32128
        assert m["seq_length"] == 512 and m["decoder_seq_length"] == 128
    for name in ("t5-v1_1-xl", "t5-v1_1-xxl", "mt5-xxl"):
        m = MODEL_PRESETS[name]
        assert m["gated_mlp"] is True and m["tied_embeddings"] is False
    assert MODEL_PRESETS["mt5-xxl"]["vocab_size"] == 250112
    assert MODEL_PRESETS["gpt3-13b"]["hidden_size"] == 5120
    assert MODEL_PRESETS["llama2-7b"]["num_kv_heads"] == 32
    for name in ("llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b"):
        assert MODEL_PRESETS[name]["num_kv_heads"] == 8


# ---------------------------------------------------------------------------------------------------
# Sizes against the published numbers.

# Narayanan'21 Table 1: (hidden, layers, heads, params in B as printed).
NARAYANAN_ROWS = {
    "megatron-1.7b": (2304, 24, 24, 1.7),
    "megatron-3.6b": (3072, 30, 32, 3.6),
    "megatron-7.5b": (4096, 36, 32, 7.5),
    "megatron-18b": (6144, 40, 48, 18.4),
    "megatron-39b": (8192, 48, 64, 39.1),
    "megatron-76b": (10240, 60, 80, 76.1),
    "megatron-145b": (12288, 80, 96, 145.6),
    "megatron-310b": (16384, 96, 128, 310.1),
    "megatron-530b": (20480, 105, 128, 529.6),
    "gpt-1t": (25600, 128, 160, 1008.0),
}


@pytest.mark.parametrize("name", sorted(NARAYANAN_ROWS))
def test_narayanan_rows(name):
    hidden, layers, heads, params_b = NARAYANAN_ROWS[name]
    m = MODEL_PRESETS[name]
    assert (m["hidden_size"], m["num_layers"], m["num_attention_heads"]) == (hidden, layers, heads)
    eq2 = narayanan_eq2(m)
    # Eq. 2 on the preset's shape reproduces the table's params column as printed.
    assert round(eq2 / 1e9, 1) == params_b
    # Our independent count agrees with Eq. 2 within 1%.
    assert _rel(count_params(m, learned_positions=True), eq2) < 0.01


@pytest.mark.parametrize(
    ("name", "expected"),
    [("gpt-1t", 1008.0e9), ("megatron-530b", 529.6e9), ("megatron-1.7b", 1.65e9)],
)
def test_headline_megatron_sizes(name, expected):
    # 1.7B is printed rounded; Eq. 2 gives 1.652B for its shape.
    assert _rel(count_params(MODEL_PRESETS[name], learned_positions=True), expected) < 0.01


def test_gpt3_175b():
    assert _rel(count_params(MODEL_PRESETS["gpt3-175b"], learned_positions=True), 175e9) < 0.02


@pytest.mark.parametrize(
    ("name", "nominal"),
    [
        ("gpt3-125m", 125e6), ("gpt3-350m", 350e6), ("gpt3-760m", 760e6), ("gpt3-1.3b", 1.3e9),
        ("gpt3-2.7b", 2.7e9), ("gpt3-6.7b", 6.7e9), ("gpt3-13b", 13e9),
    ],
)  # fmt: skip
def test_gpt3_family_sizes(name, nominal):
    assert _rel(count_params(MODEL_PRESETS[name], learned_positions=True), nominal) < 0.05


def test_comparison_pair():
    gpt, t5 = MODEL_PRESETS["gpt-100b"], MODEL_PRESETS["t5-100b"]
    assert _rel(count_params(gpt, learned_positions=True), 101e9) < 0.03
    assert _rel(count_params(t5), 106e9) < 0.03
    assert t5["encoder_layers"] == t5["decoder_layers"] == 36
    assert t5["seq_length"] == t5["decoder_seq_length"] == 1024
    assert t5["vocab_size"] == 32128 and t5["head_dim"] == 128
    assert gpt["hidden_size"] == t5["hidden_size"] == 10240
    assert gpt["ffn_hidden_size"] == t5["ffn_hidden_size"] == 40960


@pytest.mark.parametrize(
    ("name", "expected"),
    [("llama3-8b", 8.0e9), ("llama3-70b", 70.6e9), ("llama3-405b", 405e9), ("llama2-7b", 6.74e9),
     ("llama2-70b", 69.0e9)],
)  # fmt: skip
def test_llama_sizes(name, expected):
    assert _rel(count_params(MODEL_PRESETS[name]), expected) < 0.03


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Released checkpoint sizes (Hugging Face model cards), T5 counted with relative position biases
        # and norms left out.
        ("t5-small", 60.5e6), ("t5-base", 223e6), ("t5-large", 738e6), ("t5-3b", 2.85e9), ("t5-11b", 11.3e9),
        ("t5-v1_1-xl", 2.85e9), ("t5-v1_1-xxl", 11.1e9), ("mt5-xxl", 12.9e9), ("bert-base", 110e6),
        ("bert-large", 340e6),
    ],
)  # fmt: skip
def test_encoder_model_sizes(name, expected):
    m = MODEL_PRESETS[name]
    assert _rel(count_params(m, learned_positions=name.startswith("bert")), expected) < 0.05
