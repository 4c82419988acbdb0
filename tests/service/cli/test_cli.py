"""The `clustersim` command line: bad input (exit 2, one line naming the field), determinism, traces,
presets, and the shipped example scenarios (they load, the small ones simulate, and they show what their
READMEs claim)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import run_cli

from api_schemas import SimulationResult, load_request_file
from service import convert as adapters
from simcore.simulate import check, simulate

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
ALL_EXAMPLES = sorted(EXAMPLES.rglob("*.yaml"))
BUBBLE = EXAMPLES / "bubble-vs-microbatches"
TP_NODES = EXAMPLES / "tp-across-nodes"
DP_SCALING = EXAMPLES / "dp-scaling"
# The largest request a unit test simulates; the 1T example (3072 GPUs) only has to load.
SMALL_GPUS = 64

# A small pipelined TP request: GPT-3 13B, TP 8 x PP 8 on 8 DGX A100 nodes, 8 microbatches.
PIPELINED_TP = BUBBLE / "m8.yaml"


def base_request() -> dict[str, Any]:
    return yaml.safe_load(PIPELINED_TP.read_text(encoding="utf-8"))


def write_request(tmp_path: Path, data: dict[str, Any], name: str = "request.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@cache
def result_of(path: Path) -> dict[str, Any]:
    """The result JSON of one example, through the CLI's adapters (cached: several tests read it)."""
    return adapters.to_response(simulate(adapters.to_scenario(load_request_file(str(path)))))


def assert_one_line_error(err: str, field: str, rule_fragment: str) -> None:
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, f"expected exactly one line on stderr, got {err!r}"
    assert field in err, f"{field!r} not named in {err!r}"
    assert rule_fragment in err, f"rule {rule_fragment!r} not in {err!r}"


# ---- bad input: exit 2, one line on stderr naming the field and the rule --------------------------------

def _edit(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    section, key = path.split(".")
    data[section][key] = value
    return data


BAD_FIELDS: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, edits as dotted path -> value, field named, a fragment of the rule)
    ("gpus-mismatch", {"layout.dp": 2}, "layout.dp", "must equal the number of GPUs"),
    ("batch-not-divisible", {"layout.microbatch_size": 3}, "layout.global_batch_size", "divisible"),
    ("unknown-model-preset", {"model.preset": "gpt-9000"}, "model.preset", "unknown model preset"),
    ("unknown-cluster-preset", {"cluster.preset": "dgx-z9000"}, "cluster.preset", "unknown cluster preset"),
    ("tp-zero", {"layout.tp": 0}, "layout.tp", ">= 1"),
    ("hidden-negative", {"model.hidden_size": -1}, "model.hidden_size", ">= 1"),
    ("layers-zero", {"model.num_layers": 0}, "model.num_layers", ">= 1"),
    ("nic-bandwidth-zero", {"cluster.nic_bandwidth_gbit_per_s": 0.0}, "cluster.nic_bandwidth_gbit_per_s",
     "> 0"),
    ("typo-field", {"layout.tpp": 8}, "layout.tpp", "unknown field"),
    ("typo-model-field", {"model.hiden_size": 4096}, "model.hiden_size", "unknown field"),
]


@pytest.mark.parametrize(("edits", "field", "rule"), [case[1:] for case in BAD_FIELDS],
                         ids=[case[0] for case in BAD_FIELDS])
def test_bad_field_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         edits: dict[str, Any], field: str, rule: str) -> None:
    data = base_request()
    for path, value in edits.items():
        _edit(data, path, value)
    code, out, err = run_cli(capsys, "simulate", str(write_request(tmp_path, data)))
    assert code == 2
    assert out == ""
    assert_one_line_error(err, field, rule)


def test_tp_not_dividing_heads_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The 2020 1.2B shape has 15 heads: TP 2 cannot split them.
    data = yaml.safe_load((DP_SCALING / "1b-1gpu.yaml").read_text(encoding="utf-8"))
    data["cluster"]["num_gpus"] = 2
    data["layout"]["tp"] = 2
    code, _out, err = run_cli(capsys, "simulate", str(write_request(tmp_path, data)))
    assert code == 2
    assert_one_line_error(err, "layout.tp", "must divide num_attention_heads (15)")


def test_tp_not_dividing_overridden_preset_heads_names_tp(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # gpt3-13b is multi-head attention (num_kv_heads = heads, the contract's default). Overriding only
    # num_attention_heads beside the preset must not leave the preset's 40 kv heads behind: the error is about
    # tp (8 does not divide 20), not about a num_kv_heads the user never gave.
    data = base_request()
    data["model"]["num_attention_heads"] = 20
    code, _out, err = run_cli(capsys, "simulate", str(write_request(tmp_path, data)))
    assert code == 2
    assert_one_line_error(err, "layout.tp", "must divide num_attention_heads (20)")


def test_malformed_yaml_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("model: {preset: gpt3-13b\ncluster: [\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "simulate", str(path))
    assert code == 2
    assert out == ""
    assert_one_line_error(err, "request", "not valid YAML")


def test_nonexistent_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-request.yaml"
    code, out, err = run_cli(capsys, "simulate", str(missing))
    assert code == 2
    assert out == ""
    assert_one_line_error(err, "file", "no such file")


def test_not_a_mapping_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    code, _out, err = run_cli(capsys, "simulate", str(path))
    assert code == 2
    assert_one_line_error(err, "request", "must be a mapping")


def test_usage_error_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "presets", "nodes")
    assert code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("clustersim")
    return [str(script)] if script.exists() else [sys.executable, "-m", "service.cli.main"]


def test_console_script_exits_2_on_bad_input(tmp_path: Path) -> None:
    data = base_request()
    data["layout"]["tpp"] = 8
    path = write_request(tmp_path, data)
    proc = subprocess.run([*_console_script(), "simulate", str(path)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert_one_line_error(proc.stderr, "layout.tpp", "unknown field")


# ---- output paths and flags: invalid input, checked before simulating ----------------------------------

def _unwritable(tmp_path: Path, kind: str) -> str:
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    return {"missing directory": str(tmp_path / "no" / "such" / "dir" / "t.json"),
            "under a file": str(a_file / "t.json"),
            "a directory": str(tmp_path)}[kind]


@pytest.mark.parametrize("flag", ["--trace", "--timeline"])
@pytest.mark.parametrize("kind", ["missing directory", "under a file", "a directory"])
def test_an_unwritable_output_exits_2_before_simulating(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, flag: str,
                                                        kind: str) -> None:
    def never(*_: Any) -> Any:
        raise AssertionError("simulated although the output cannot be written")

    monkeypatch.setattr("simcore.simulate", never)
    path = _unwritable(tmp_path, kind)
    code, out, err = run_cli(capsys, "simulate", str(PIPELINED_TP), flag, path)
    assert code == 2
    assert out == ""
    assert err.startswith(f"clustersim: invalid input: {flag}: cannot write {path}: ") and err.count("\n") == 1


def test_the_console_script_with_a_trace_in_a_missing_directory_prints_nothing(tmp_path: Path) -> None:
    # What a new user ran: the result came out, then a traceback and exit 1.
    path = tmp_path / "no" / "such" / "dir" / "t.json"
    proc = subprocess.run([*_console_script(), "simulate", str(PIPELINED_TP), "--trace", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"clustersim: invalid input: --trace: cannot write {path}: no directory {path.parent}\n"


def test_a_sweep_out_that_cannot_be_a_directory_exits_2_before_reading_the_grid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    missing_request = tmp_path / "never-read.json"  # the flag is checked first: the file is not even opened
    for out in (a_file, a_file / "sweep"):
        code, stdout, err = run_cli(capsys, "sweep", str(missing_request), "--out", str(out))
        assert (code, stdout) == (2, "")
        assert err.startswith("clustersim: invalid input: --out: cannot write") and err.count("\n") == 1
    assert a_file.read_text(encoding="utf-8") == "x"


@pytest.mark.parametrize("command", ["search", "sweep"])
def test_an_address_without_ray_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 command: str) -> None:
    code, out, err = run_cli(capsys, command, str(tmp_path / "never-read.json"), "--out" if command == "sweep"
                             else "--json", *([str(tmp_path / "out")] if command == "sweep" else []),
                             "--address", "ray://elsewhere:10001")
    assert (code, out) == (2, "")
    assert err == "clustersim: invalid input: --address: only applies to --executor ray\n"


# ---- results ------------------------------------------------------------------------------------------

_WALL_TIME = re.compile(r'"wall_time_s": [0-9.eE+-]+')


def test_same_request_gives_identical_json(capsys: pytest.CaptureFixture[str]) -> None:
    code1, out1, _ = run_cli(capsys, "simulate", str(PIPELINED_TP))
    code2, out2, _ = run_cli(capsys, "simulate", str(PIPELINED_TP))
    assert code1 == code2 == 0
    assert _WALL_TIME.search(out1)
    assert _WALL_TIME.sub("", out1) == _WALL_TIME.sub("", out2)  # byte-identical apart from wall_time_s
    first, second = json.loads(out1), json.loads(out2)
    first["simulator"].pop("wall_time_s")
    second["simulator"].pop("wall_time_s")
    assert first == second


def test_result_validates_against_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", str(PIPELINED_TP))
    assert code == 0, err
    result = SimulationResult.model_validate(json.loads(out))
    assert result.iteration_time_s > 0
    assert result.simulator.fidelity == "representative"
    breakdown = result.time_breakdown_s.model_dump()
    assert sum(breakdown.values()) == pytest.approx(result.iteration_time_s, rel=1e-9)
    assert [s.index for s in result.stages] == list(range(8))
    assert result.trace is None


def test_trace_and_timeline_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace_path, timeline_path = tmp_path / "trace.json", tmp_path / "timeline.jsonl"
    code, out, err = run_cli(capsys, "simulate", str(PIPELINED_TP), "--trace", str(trace_path),
                             "--timeline", str(timeline_path))
    assert code == 0, err
    result = json.loads(out)

    trace = json.loads(trace_path.read_text(encoding="utf-8"))
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    assert spans
    assert {e["tid"] for e in spans} <= set(names), "every track with spans has a thread_name"
    assert len(set(names.values())) == len(names), "one thread per track"
    assert {"compute", "tp_comm", "pp_comm", "bubble"} <= {e["cat"] for e in spans}
    for e in spans:
        assert e["dur"] >= 0 and e["ts"] >= 0
        # microseconds, inside the iteration
        assert e["ts"] + e["dur"] <= result["iteration_time_s"] * 1e6 + 1

    lines = timeline_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(spans)
    rows = [json.loads(line) for line in lines]
    for row in rows:
        assert set(row) == {"track", "name", "category", "start_s", "end_s"}
        assert 0 <= row["start_s"] <= row["end_s"]
    assert {r["track"] for r in rows} == {names[e["tid"]] for e in spans}
    assert {"compute", "tp_comm", "pp_comm", "bubble"} <= {r["category"] for r in rows}


def test_presets_list_the_contract_names(capsys: pytest.CaptureFixture[str]) -> None:
    expected = {
        "models": {"gpt3-125m", "gpt3-1.3b", "gpt3-13b", "gpt3-175b", "megatron-1.7b", "megatron-530b",
                   "gpt-1t", "gpt-100b", "t5-100b", "t5-small", "t5-11b", "t5-v1_1-xxl", "mt5-xxl",
                   "bert-base", "bert-large", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b",
                   "llama3-405b"},
        "clusters": {"dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h200", "dgx-2-v100"},
        "gpus": {"v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"},
    }
    for kind, names in expected.items():
        code, out, err = run_cli(capsys, "presets", kind)
        assert code == 0, err
        listing = json.loads(out)
        assert set(listing) == {kind}
        assert names <= set(listing[kind]), names - set(listing[kind])
    code, out, _ = run_cli(capsys, "presets")
    assert code == 0
    assert set(json.loads(out)) == {"models", "clusters", "gpus"}


# ---- the shipped examples ------------------------------------------------------------------------------

def test_examples_exist() -> None:
    names = {p.relative_to(EXAMPLES).as_posix() for p in ALL_EXAMPLES}
    assert "gpt-1t-3072-a100.yaml" in names
    for folder, files in {
        "bubble-vs-microbatches": ["m8", "m16", "m32", "m64"],
        "tp-across-nodes": ["tp16", "tp8-pp2", "tp16-1nic", "tp8-pp2-1nic"],
        "dp-scaling": ["1b-1gpu", "1b-128gpu", "2b-2gpu", "2b-256gpu", "4b-4gpu", "4b-512gpu", "8b-8gpu",
                       "8b-1024gpu"],
    }.items():
        assert (EXAMPLES / folder / "README.md").is_file()
        for stem in files:
            assert f"{folder}/{stem}.yaml" in names


@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=[p.relative_to(EXAMPLES).as_posix() for p in ALL_EXAMPLES])
def test_example_loads_and_validates(path: Path) -> None:
    scenario = adapters.to_scenario(load_request_file(str(path)))
    check(scenario)  # the layout rules (dp*tp*pp = GPUs, divisibility), without simulating


SMALL_EXAMPLES = [p for p in ALL_EXAMPLES
                  if adapters.to_scenario(load_request_file(str(p))).cluster.num_gpus <= SMALL_GPUS]


@pytest.mark.parametrize("path", SMALL_EXAMPLES,
                         ids=[p.relative_to(EXAMPLES).as_posix() for p in SMALL_EXAMPLES])
def test_small_example_simulates(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", str(path))
    assert code == 0, err
    result = SimulationResult.model_validate(json.loads(out))
    assert result.iteration_time_s > 0


def _per_layer_tp_s(result: dict[str, Any]) -> float:
    """TP communication time per transformer layer per microbatch. communication_s.tp is summed over the
    stages, so divide by every stage's layers and by the microbatch count (batch 16, microbatch 1, DP 1:
    m = 16)."""
    layers = sum(stage["layers"].get("transformer", 0) for stage in result["stages"])
    return float(result["communication_s"]["tp"]) / layers / 16


def test_tp_across_nodes_is_slower_than_pipelining() -> None:
    tp16, tp8 = result_of(TP_NODES / "tp16.yaml"), result_of(TP_NODES / "tp8-pp2.yaml")
    assert tp16["iteration_time_s"] > tp8["iteration_time_s"]
    assert _per_layer_tp_s(tp16) > _per_layer_tp_s(tp8)
    tp16_1nic, tp8_1nic = result_of(TP_NODES / "tp16-1nic.yaml"), result_of(TP_NODES / "tp8-pp2-1nic.yaml")
    assert tp16_1nic["iteration_time_s"] > tp8_1nic["iteration_time_s"]


def test_tp_across_one_nic_costs_at_least_3x_per_layer() -> None:
    tp16_1nic = result_of(TP_NODES / "tp16-1nic.yaml")
    tp8, tp16 = result_of(TP_NODES / "tp8-pp2.yaml"), result_of(TP_NODES / "tp16.yaml")
    assert _per_layer_tp_s(tp16_1nic) >= 3 * _per_layer_tp_s(tp8)
    assert _per_layer_tp_s(tp16_1nic) > _per_layer_tp_s(tp16)  # fewer NICs, slower cross-node TP
    # TP inside a node does not care how many NICs the node has.
    tp8_1nic = result_of(TP_NODES / "tp8-pp2-1nic.yaml")
    assert _per_layer_tp_s(tp8_1nic) == pytest.approx(_per_layer_tp_s(tp8), rel=1e-6)


def test_bubble_shrinks_as_microbatches_grow() -> None:
    results = [result_of(BUBBLE / f"m{m}.yaml") for m in (8, 16, 32, 64)]
    bubbles = [r["bubble_fraction"] for r in results]
    overheads = [r["pipeline_overhead"] for r in results]
    assert all(a > b for a, b in zip(bubbles, bubbles[1:], strict=False)), bubbles
    assert all(a > b for a, b in zip(overheads, overheads[1:], strict=False)), overheads
    # Never better than the equal-stage, free-communication closed form (p-1)/(m+p-1), p = 8.
    for m, bubble in zip((8, 16, 32, 64), bubbles, strict=True):
        assert bubble >= 7 / (m + 7) * 0.95


def test_overlap_grad_reduce_hides_dp_comm_without_pipeline() -> None:
    # 8.7B, DP 128 x TP 8 (pp 1, one microbatch): with overlap_grad_reduce the gradient buckets are reduced
    # while the backward pass still runs, so less of the DP all-reduce is exposed than without overlap.
    plain_request = load_request_file(str(DP_SCALING / "8b-1024gpu.yaml"))
    assert not plain_request.layout.overlap_grad_reduce
    request = plain_request.model_copy(update={"layout": plain_request.layout.model_copy(
        update={"overlap_grad_reduce": True})})
    overlapped = adapters.to_response(simulate(adapters.to_scenario(request)))
    plain = adapters.to_response(simulate(adapters.to_scenario(plain_request)))
    assert overlapped["communication_s"]["dp"] > 0
    assert overlapped["time_breakdown_s"]["dp_comm"] < plain["time_breakdown_s"]["dp_comm"]
    assert overlapped["iteration_time_s"] < plain["iteration_time_s"]
