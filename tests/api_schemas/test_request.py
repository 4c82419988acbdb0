"""api_schemas: request validation, error conversion and request loading."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from api_schemas import (
    ClusterIn,
    FieldError,
    LayoutIn,
    ModelIn,
    RequestError,
    SimulationRequest,
    SimulationResult,
    error_body,
    from_validation_error,
    load_request_file,
    parse_request,
)

FULL_REQUEST: dict[str, Any] = {
    "model": {
        "preset": "t5-11b",
        "architecture": "encoder_decoder",
        "encoder_layers": 24,
        "decoder_layers": 24,
        "hidden_size": 1024,
        "num_attention_heads": 128,
        "num_kv_heads": 128,
        "head_dim": 128,
        "ffn_hidden_size": 65536,
        "gated_mlp": False,
        "vocab_size": 32128,
        "seq_length": 512,
        "decoder_seq_length": 128,
        "tied_embeddings": True,
        "attention": "flash",
    },
    "cluster": {
        "preset": "dgx-a100",
        "num_nodes": 4,
        "gpu": "a100-80gb",
        "gpus_per_node": 8,
        "nvlink_bandwidth_gb_per_s": 300.0,
        "nics_per_node": 8,
        "nic_bandwidth_gbit_per_s": 200.0,
        "fabric": "rail_optimized",
        "oversubscription": 1.0,
        "intra_node_latency_us": 2.5,
        "inter_node_latency_us": 5.0,
        "slow_gpus": [{"gpu": 3, "compute_time_factor": 1.2}],
        "degraded_links": [{"node": 1, "nic": 2, "bandwidth_factor": 0.5}, {"gpu": 9, "bandwidth_factor": 0.75}],
        "compute_variability": 0.01,
    },
    "layout": {
        "dp": 4,
        "tp": 8,
        "pp": 1,
        "cp": 1,
        "cp_comm": "p2p",
        "virtual_stages": 1,
        "microbatch_size": 2,
        "global_batch_size": 64,
        "schedule": "gpipe",
        "sequence_parallel": True,
        "zero_stage": 3,
        "recompute": "selective",
        "overlap_grad_reduce": True,
        "placement": "tp,pp,dp",
        "tp_comm_overlap": True,
        "async_tensor_model_parallel_allreduce": True,
        "encoder_pipeline_stages": 1,
        "pipeline_partition": "even",
        "precision": "bf16",
        "zero_implementation": "fsdp",
        "fp8_param_gather": False,
        "fp8_attention": False,
        "fp8_params": False,
        "fp8_weight_cache": True,
        "attention_backend": "fused",
        "zero_quantized_weights": False,
        "zero_hpz_partition_size": 1,
        "zero_quantized_gradients": False,
        "ep": 1,
        "expert_tp": 1,
        "optimizer_post_validation": False,
    },
    "options": {"fidelity": "full", "trace": True, "seed": 7, "collective_algorithm": "hierarchical",
                "extrapolate": True},
}

MINIMAL: dict[str, Any] = {
    "model": {"preset": "gpt3-1.3b"},
    "cluster": {"preset": "dgx-a100", "num_nodes": 1},
    "layout": {"dp": 2, "tp": 4, "pp": 1, "global_batch_size": 16},
}

SIZE_FIELDS: list[tuple[str, str]] = (
    [
        ("model", name)
        for name in (
            "num_layers",
            "encoder_layers",
            "decoder_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "ffn_hidden_size",
            "vocab_size",
            "seq_length",
            "decoder_seq_length",
        )
    ]
    + [("cluster", name) for name in ("num_nodes", "gpus_per_node", "nics_per_node")]
    + [
        ("layout", name)
        for name in (
            "dp",
            "tp",
            "pp",
            "cp",
            "virtual_stages",
            "microbatch_size",
            "global_batch_size",
            "encoder_pipeline_stages",
        )
    ]
)


def with_field(section: str, name: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(MINIMAL if base is None else base)
    doc.setdefault(section, {})[name] = value
    return doc


def errors_of(doc: Any) -> list[FieldError]:
    with pytest.raises(ValidationError) as info:
        SimulationRequest.model_validate(doc)
    return from_validation_error(info.value).details


def test_full_request_round_trips() -> None:
    request = SimulationRequest.model_validate(FULL_REQUEST)
    assert request.model_dump(exclude_none=True) == FULL_REQUEST
    dumped = request.model_dump()
    assert dumped["model"]["num_layers"] is None and dumped["cluster"]["num_gpus"] is None
    assert SimulationRequest.model_validate_json(request.model_dump_json()) == request
    assert parse_request(json.dumps(FULL_REQUEST)) == request


def test_minimal_request_gets_the_contract_defaults() -> None:
    request = SimulationRequest.model_validate(MINIMAL)
    layout = request.layout
    assert (layout.virtual_stages, layout.microbatch_size, layout.schedule) == (1, 1, "1f1b")
    assert (layout.zero_stage, layout.recompute, layout.placement, layout.precision) == (
        0,
        "none",
        "tp,cp,dp,pp",
        "bf16",
    )
    assert not layout.sequence_parallel and not layout.overlap_grad_reduce
    assert not layout.async_tensor_model_parallel_allreduce  # Megatron-LM before 2021-09: every TP collective exposed
    assert layout.encoder_pipeline_stages is None
    options = request.options
    assert (options.fidelity, options.trace, options.seed, options.collective_algorithm) == (
        "representative",
        False,
        0,
        "auto",  # the contract: NCCL's choice by default
    )
    assert request.model.num_layers is None and request.cluster.num_gpus is None


@pytest.mark.parametrize(
    ("section", "name"),
    [("layout", "tpp"), ("model", "hiden_size"), ("cluster", "gpu_per_node"), ("options", "seeds")],
)
def test_unknown_field_is_rejected_with_its_dotted_name(section: str, name: str) -> None:
    assert errors_of(with_field(section, name, 1)) == [FieldError(f"{section}.{name}", "unknown field")]


def test_unknown_top_level_section_is_rejected() -> None:
    assert errors_of({**MINIMAL, "optoins": {}}) == [FieldError("optoins", "unknown field")]


def test_a_misspelled_section_names_the_unknown_field_first() -> None:
    # `layuot:` is unknown and, as a consequence, `layout` is missing: the first (and the one-line) error is the
    # typo, with the section it probably meant.
    document = {k: v for k, v in MINIMAL.items() if k != "layout"} | {"layuot": MINIMAL["layout"]}
    with pytest.raises(RequestError) as info:
        parse_request(json.dumps(document))
    assert info.value.details == [FieldError("layuot", "unknown field; did you mean 'layout'?"),
                                  FieldError("layout", "is required")]
    assert str(info.value) == "layuot: unknown field; did you mean 'layout'? (and 1 more)"


def test_an_unknown_field_like_no_missing_one_keeps_its_place() -> None:
    # A stray key is no typo of the missing section: the missing section is named first, as pydantic orders.
    document = {k: v for k, v in MINIMAL.items() if k != "layout"} | {"colour": "blue"}
    assert errors_of(document) == [FieldError("layout", "is required"), FieldError("colour", "unknown field")]


@pytest.mark.parametrize(("section", "name"), SIZE_FIELDS)
@pytest.mark.parametrize("value", [0, -1])
def test_zero_or_negative_size_names_the_field(section: str, name: str, value: int) -> None:
    assert errors_of(with_field(section, name, value)) == [FieldError(f"{section}.{name}", "must be >= 1")]


@given(field=st.sampled_from(SIZE_FIELDS), value=st.integers(max_value=0))
def test_any_size_below_one_is_rejected_naming_that_field(field: tuple[str, str], value: int) -> None:
    section, name = field
    assert errors_of(with_field(section, name, value)) == [FieldError(f"{section}.{name}", "must be >= 1")]


def _maximum(section: str, name: str) -> int:
    """A size field's physical maximum as the schema states it (10^12 where it states none)."""
    model = {"model": ModelIn, "cluster": ClusterIn, "layout": LayoutIn}[section]
    schema = model.model_json_schema()["properties"][name]
    options = schema.get("anyOf", [schema])
    return int(next((o["maximum"] for o in options if "maximum" in o), 10**12))


@given(field=st.sampled_from(SIZE_FIELDS), fraction=st.floats(min_value=0, max_value=1))
def test_any_positive_size_up_to_its_maximum_is_accepted(field: tuple[str, str], fraction: float) -> None:
    section, name = field
    value = max(1, int(fraction * _maximum(section, name)))
    request = SimulationRequest.model_validate(with_field(section, name, value))
    assert getattr(getattr(request, section), name) == value


@pytest.mark.parametrize(("section", "name"), [f for f in SIZE_FIELDS if _maximum(*f) < 10**12])
def test_a_size_past_its_physical_maximum_names_the_field(section: str, name: str) -> None:
    top = _maximum(section, name)
    assert errors_of(with_field(section, name, top + 1)) == [FieldError(f"{section}.{name}", f"must be <= {top}")]


@pytest.mark.parametrize("value", ["8", 2.5, 4.0, True, None])
def test_ints_are_strict(value: Any) -> None:
    [error] = errors_of(with_field("layout", "tp", value))
    assert error.field == "layout.tp"
    assert error.rule == "must be an integer"


@pytest.mark.parametrize("value", ["yes", 1, "true"])
@pytest.mark.parametrize("name", ["sequence_parallel", "async_tensor_model_parallel_allreduce"])
def test_bools_are_strict(value: Any, name: str) -> None:
    assert errors_of(with_field("layout", name, value)) == [FieldError(f"layout.{name}", "must be true or false")]


def test_floats_take_ints_but_not_strings_bools_or_infinity() -> None:
    request = SimulationRequest.model_validate(with_field("cluster", "nvlink_bandwidth_gb_per_s", 300))
    assert request.cluster.nvlink_bandwidth_gb_per_s == 300.0
    for bad in ("300", True):
        assert errors_of(with_field("cluster", "nvlink_bandwidth_gb_per_s", bad)) == [
            FieldError("cluster.nvlink_bandwidth_gb_per_s", "must be a number")
        ]
    assert errors_of(with_field("cluster", "nic_bandwidth_gbit_per_s", float("inf"))) == [
        FieldError("cluster.nic_bandwidth_gbit_per_s", "must be a finite number")
    ]


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("nvlink_bandwidth_gb_per_s", 0, "must be > 0"),
        ("nic_bandwidth_gbit_per_s", -100.0, "must be > 0"),
        ("oversubscription", 0.5, "must be >= 1"),
        ("intra_node_latency_us", -1e-3, "must be >= 0"),
        ("inter_node_latency_us", -1, "must be >= 0"),
    ],
)
def test_float_ranges(name: str, value: float, rule: str) -> None:
    assert errors_of(with_field("cluster", name, value)) == [FieldError(f"cluster.{name}", rule)]


def test_zero_latency_and_full_bisection_are_allowed() -> None:
    doc = with_field("cluster", "intra_node_latency_us", 0)
    doc["cluster"]["oversubscription"] = 1
    cluster = SimulationRequest.model_validate(doc).cluster
    assert (cluster.intra_node_latency_us, cluster.oversubscription) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("section", "name", "value", "rule"),
    [
        ("layout", "schedule", "gpip",
         "must be one of 'gpipe', '1f1b', 'interleaved_1f1b', 'zb_h1', 'zb_h2', 'zb_v', 'dualpipe'"),
        ("layout", "recompute", "partial", "must be one of 'none', 'selective', 'full'"),
        ("layout", "precision", "fp4", "must be one of 'bf16', 'fp16', 'fp8', 'mxfp8', 'nvfp4'"),
        ("layout", "zero_stage", 4, "must be one of 0, 1, 2, 3"),
        ("layout", "zero_stage", True, "must be one of 0, 1, 2, 3"),
        ("layout", "zero_stage", 1.0, "must be one of 0, 1, 2, 3"),
        (
            "model",
            "architecture",
            "decoder-only",
            "must be one of 'decoder_only', 'encoder_decoder', 'encoder_only'",
        ),
        ("model", "attention", "fused", "must be one of 'standard', 'flash'"),
        (
            "cluster",
            "gpu",
            "a100",
            "must be one of 'v100-32gb', 'a100-40gb', 'a100-80gb', 'h100-80gb', 'h200-141gb', 'b200-180gb', "
            "'gb200-186gb', 'b300-288gb', 'gb300-288gb', 'l40s-48gb'",
        ),
        ("cluster", "fabric", "torus", "must be one of 'fat_tree', 'rail_optimized'"),
        ("options", "fidelity", "low", "must be one of 'representative', 'full'"),
        ("options", "collective_algorithm", "nvls", "must be one of 'auto', 'ring', 'tree', 'hierarchical'"),
    ],
)
def test_bad_enum_lists_the_choices(section: str, name: str, value: Any, rule: str) -> None:
    doc = copy.deepcopy(MINIMAL)
    doc.setdefault(section, {})[name] = value
    assert errors_of(doc) == [FieldError(f"{section}.{name}", rule)]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_every_zero_stage_is_accepted(stage: int) -> None:
    assert (
        SimulationRequest.model_validate(with_field("layout", "zero_stage", stage)).layout.zero_stage == stage
    )


@pytest.mark.parametrize(
    ("value", "normal"), [("tp,dp,pp", "tp,dp,pp"), ("pp,tp,dp", "pp,tp,dp"), (" dp , pp,tp ", "dp,pp,tp")]
)
def test_placement_accepts_any_order_of_the_three_dimensions(value: str, normal: str) -> None:
    assert (
        SimulationRequest.model_validate(with_field("layout", "placement", value)).layout.placement == normal
    )


@pytest.mark.parametrize(
    "value", ["tp,dp", "tp,dp,pp,tp", "tp,dp,ep", "tp;dp;pp", "TP,DP,PP", "", "tp,tp,pp"]
)
def test_placement_must_be_a_permutation_of_dp_tp_pp(value: str) -> None:
    [error] = errors_of(with_field("layout", "placement", value))
    assert error.field == "layout.placement"
    assert "dp, tp and pp once each" in error.rule


def test_num_nodes_and_num_gpus_together_name_num_gpus() -> None:
    doc = with_field("cluster", "num_gpus", 8)
    assert errors_of(doc) == [FieldError("cluster.num_gpus", "give num_nodes or num_gpus, not both")]
    del doc["cluster"]["num_nodes"]
    assert SimulationRequest.model_validate(doc).cluster.num_gpus == 8


def test_missing_required_fields_are_named() -> None:
    doc = copy.deepcopy(MINIMAL)
    del doc["layout"]["global_batch_size"]
    del doc["cluster"]
    assert errors_of(doc) == [
        FieldError("cluster", "is required"),
        FieldError("layout.global_batch_size", "is required"),
    ]


def test_cross_field_rules_are_left_to_the_domain_layer() -> None:
    # 2 * 4 * 1 != 16 GPUs and 7 microbatches per replica do not divide: not this package's business.
    doc = with_field("layout", "global_batch_size", 7)
    doc["cluster"] = {"preset": "dgx-a100", "num_nodes": 2}
    doc["layout"]["virtual_stages"] = 4
    SimulationRequest.model_validate(doc)


def test_section_of_the_wrong_type() -> None:
    assert errors_of({**MINIMAL, "layout": [1, 2]}) == [FieldError("layout", "must be a mapping")]


def test_request_error_message_is_one_line_with_a_count() -> None:
    doc = with_field("layout", "tp", 0)
    doc["layout"]["pp"] = -2
    doc["layout"]["tpp"] = 1
    err = from_validation_error(pytest.raises(ValidationError, SimulationRequest.model_validate, doc).value)
    assert [d.field for d in err.details] == ["layout.tp", "layout.pp", "layout.tpp"]
    assert str(err) == "layout.tp: must be >= 1 (and 2 more)"
    assert str(RequestError.for_field("layout.tp", "must be >= 1")) == "layout.tp: must be >= 1"
    for detail in err.details:
        assert "\n" not in detail.rule


def test_error_body_shape() -> None:
    err = RequestError([FieldError("layout.tp", "must be >= 1"), FieldError("layout.tpp", "unknown field")])
    assert error_body(err) == {
        "error": {
            "code": "invalid_request",
            "message": "layout.tp: must be >= 1 (and 1 more)",
            "details": [
                {"field": "layout.tp", "rule": "must be >= 1"},
                {"field": "layout.tpp", "rule": "unknown field"},
            ],
        }
    }
    assert error_body(err, code="not_found")["error"]["code"] == "not_found"
    json.dumps(error_body(err))


def test_request_error_pickles() -> None:
    err = RequestError([FieldError("layout.tp", "must be >= 1"), FieldError("model", "is required")])
    copied = pickle.loads(pickle.dumps(err))
    assert copied.details == err.details and str(copied) == str(err)


def test_list_indexes_are_numbers_in_the_field_path() -> None:
    result = example_result()
    result["stages"][1]["forward_s"] = "slow"
    with pytest.raises(ValidationError) as info:
        SimulationResult.model_validate(result)
    assert from_validation_error(info.value).details == [FieldError("stages.1.forward_s", "must be a number")]


# --- loading ---

YAML_REQUEST = """\
# a GPT-3 1.3B run on one DGX A100
model:
  preset: gpt3-1.3b
  seq_length: 2048
cluster:
  preset: dgx-a100
  num_nodes: 1
  nic_bandwidth_gbit_per_s: 2e2
layout:
  dp: 2
  tp: 4
  pp: 1
  global_batch_size: 16
  schedule: gpipe
options:
  trace: true
"""


def test_yaml_request_parses() -> None:
    request = parse_request(YAML_REQUEST)
    assert request.model.preset == "gpt3-1.3b" and request.model.seq_length == 2048
    assert request.cluster.nic_bandwidth_gbit_per_s == 200.0
    assert (request.layout.dp, request.layout.tp, request.layout.schedule) == (2, 4, "gpipe")
    assert request.options.trace is True


def test_json_request_parses_even_with_tabs() -> None:
    text = json.dumps(MINIMAL, indent="\t")
    assert parse_request(text) == SimulationRequest.model_validate(MINIMAL)


def test_validation_errors_come_through_parse_request() -> None:
    with pytest.raises(RequestError) as info:
        parse_request(YAML_REQUEST.replace("  tp: 4", "  tpp: 4"))
    assert info.value.details == [
        FieldError("layout.tpp", "unknown field; did you mean 'tp'?"),
        FieldError("layout.tp", "is required"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "model: [\n  a: b\n",
        "model:\n  preset: x\n bad: 1\n",
        "a: 1\n---\nb: 2\n",
        "k: !!python/object:os.system {}",
    ],
)
def test_malformed_yaml_is_one_line_naming_the_source(text: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(text, source="run.yaml")
    [detail] = info.value.details
    assert detail.field == "request"
    assert detail.rule.startswith("run.yaml is not valid YAML")
    assert "\n" not in str(info.value)


def test_malformed_yaml_gives_the_line() -> None:
    with pytest.raises(RequestError) as info:
        parse_request("model:\n  preset: x\n    bad: 1\n")
    assert "(line 3, column" in str(info.value)


def test_malformed_json_gives_the_line() -> None:
    # The value missing after `"layout":` is at line 3, column 12 whatever the interpreter; the wording of the
    # json module's own message differs between Python versions (3.13 reworded trailing commas), so it is not
    # asserted.
    with pytest.raises(RequestError) as info:
        parse_request('{\n\t"model": {"preset": "x"},\n\t"layout": }', source="run.json")
    [detail] = info.value.details
    assert detail.field == "request"
    assert detail.rule.startswith("run.json is not valid JSON: ")
    assert detail.rule.endswith(" (line 3, column 12)")
    assert "\n" not in detail.rule


@pytest.mark.parametrize(("text", "what"), [("", "an empty document"), ("- 1\n", "a list"), ("42", "a int")])
def test_top_level_must_be_a_mapping(text: str, what: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request(text)
    assert info.value.details == [
        FieldError("request", f"<request> must be a mapping with model, cluster and layout (got {what})")
    ]


def test_a_key_given_twice_is_rejected() -> None:
    with pytest.raises(RequestError) as info:
        parse_request(YAML_REQUEST + "  seed: 1\n  seed: 2\n")
    assert info.value.details == [FieldError("options.seed", "is given twice (line 18, column 3)")]
    with pytest.raises(RequestError) as info:
        parse_request('{"layout": {"dp": 1, "dp": 2}}')
    assert info.value.details[0].field == "layout.dp"
    text = json.dumps(MINIMAL, indent="\t").replace('"tp": 4', '"tp": 4, "tp": 8')
    with pytest.raises(RequestError) as info:
        parse_request(text)
    assert info.value.details == [FieldError("layout.tp", "is given twice")]


def test_yaml_bool_key_is_rejected() -> None:
    with pytest.raises(RequestError) as info:
        parse_request(YAML_REQUEST + "  on: 1\n")
    assert info.value.details[0].field == "options.on"
    assert "must be strings" in info.value.details[0].rule


def test_yaml_anchors_and_merge_keys_work() -> None:
    text = (
        "model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 1}\n"
        "layout:\n  <<: {dp: 2, tp: 4, pp: 1}\n  global_batch_size: 16\n"
    )
    assert parse_request(text).layout.tp == 4


def test_load_request_file(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(YAML_REQUEST, encoding="utf-8")
    assert load_request_file(str(path)) == parse_request(YAML_REQUEST)
    path.write_text("model: [", encoding="utf-8")
    with pytest.raises(RequestError, match="run.yaml is not valid YAML"):
        load_request_file(str(path))


def test_missing_or_unreadable_file_names_file(tmp_path: Path) -> None:
    for bad in (tmp_path / "absent.yaml", tmp_path):
        with pytest.raises(RequestError) as info:
            load_request_file(str(bad))
        assert [d.field for d in info.value.details] == ["file"]
        assert str(bad) in info.value.details[0].rule
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00model")
    with pytest.raises(RequestError) as info:
        load_request_file(str(binary))
    assert info.value.details == [FieldError("file", f"{binary}: is not UTF-8 text")]


# --- result ---


def example_result() -> dict[str, Any]:
    stage = {
        "index": 0,
        "layers": {"embedding": 1, "decoder": 12},
        "forward_s": 0.01,
        "backward_s": 0.02, "backward_input_s": 0.013, "backward_weight_s": 0.007,
        "bubble_s": 0.15,
        "busy_fraction": 0.8,
        "memory": None,
    }
    return {
        "iteration_time_s": 1.5,
        "samples_per_s": 10.7,
        "tokens_per_s": 21845.3,
        "model_flops_per_iteration": 1.2e17,
        "model_tflops_per_gpu": 150.0,
        "mfu": 0.48,
        "hardware_tflops_per_gpu": 160.0,
        "hfu": 0.51,
        "bubble_fraction": 0.1,
        "pipeline_overhead": 0.12,
        "time_breakdown_s": {
            "compute": 1.0,
            "recompute": 0.0,
            "tp_comm": 0.1,
            "pp_comm": 0.05,
            "dp_comm": 0.1,
            "optimizer": 0.05,
            "bubble": 0.15,
            "other": 0.05,
        },
        "communication_s": {"tp": 0.2, "pp": 0.1, "dp": 0.3, "zero": 0.0},
        "communication_bytes": {"tp": 1e9, "pp": 2e8, "dp": 5e9, "zero": 0.0},
        "stages": [stage, {**stage, "index": 1, "layers": {"decoder": 12, "logits": 1}}],
        "memory": {"peak_gib_per_gpu": 40.5, "capacity_gib": 80.0, "fits": True, "breakdown_gib": None},
        "warnings": [],
        "simulator": {
            "version": "0.1.0",
            "events": 1234,
            "fidelity": "representative",
            "simulated_ranks": 4,
            "wall_time_s": 0.2,
        },
    }


def test_result_model_accepts_the_contract_shape() -> None:
    result = SimulationResult.model_validate(example_result())
    assert result.stages[1].layers == {"decoder": 12, "logits": 1}
    assert result.memory is not None and result.memory.breakdown_gib is None
    assert result.model_dump(exclude_none=True)["simulator"]["events"] == 1234


def test_result_memory_may_be_null() -> None:
    assert SimulationResult.model_validate({**example_result(), "memory": None}).memory is None


def test_result_rejects_unknown_and_missing_fields() -> None:
    result = example_result()
    result["time_breakdown_s"]["idle"] = 0.0
    del result["warnings"]
    with pytest.raises(ValidationError) as info:
        SimulationResult.model_validate(result)
    assert from_validation_error(info.value).details == [
        FieldError("time_breakdown_s.idle", "unknown field"),
        FieldError("warnings", "is required"),
    ]


def test_layout_model_can_be_built_directly() -> None:
    layout = LayoutIn(dp=1, tp=1, pp=1, global_batch_size=8)
    assert layout.placement == "tp,cp,dp,pp"
