"""The CLI command, the Python call and the HTTP route share one code path: `clustersim import` prints a request
`simulate` runs unchanged (ignored keys as comments), `export` prints the launch command, bad input is exit 2 /
HTTP 422 naming the line or key; `search --export megatron` prints the best layout's command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

import clustersim
from service.cli.main import main
from service.http.app import create_app
from service.settings import Settings

DATA = Path(__file__).parent / "data"
ARGS = DATA / "train_llama3_8b_h100_fp8.args"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_import_then_simulate_then_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "import", "megatron", str(ARGS))
    assert code == 0, err
    assert "# ignored:\n" in out and '#   overlap_param_gather: "True"' in out
    path = tmp_path / "llama.yaml"
    path.write_text(out)
    assert yaml.safe_load(out)["layout"]["global_batch_size"] == 128
    code, result, err = _cli(capsys, "simulate", str(path))
    assert code == 0, err
    assert json.loads(result)["iteration_time_s"] > 0
    code, command, err = _cli(capsys, "export", "megatron", str(path))
    assert code == 0, err
    assert command.startswith("torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py")
    command_file = tmp_path / "run.sh"
    command_file.write_text(command)
    code, again, err = _cli(capsys, "import", "megatron", str(command_file))
    assert code == 0 and yaml.safe_load(again) == yaml.safe_load(out), err


def test_import_json_puts_ignored_keys_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "import", "hf", str(DATA / "hf" / "qwen3-8b.json"), "--json")
    assert code == 0
    assert json.loads(out)["model"]["num_kv_heads"] == 8
    assert "ignored: rope_theta: 1000000" in err and "assumed: seq_length: 131072" in err


@pytest.mark.parametrize("kind, text, where", [
    ("megatron", "pretrain_gpt.py\n  --num-layers 2 --no-such-flag\n", "bad.txt:2"),
    ("hf", '{"architectures": ["MiniMaxM1ForCausalLM"]}', "bad.txt.architectures"),
    ("hf", "{\n  oops\n}", "bad.txt:2"),
])
def test_bad_input_is_exit_2_naming_the_line_or_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    kind: str, text: str, where: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text)
    code, _out, err = _cli(capsys, "import", kind, str(path))
    assert code == 2
    assert err.count("\n") == 1 and where.replace("bad.txt", str(path)) in err


def test_search_export_prints_the_best_layouts_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "search.yaml"
    path.write_text("model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 1}\nglobal_batch_size: 32\n"
                    "bounds: {max_candidates: 6}\n")
    code, out, err = _cli(capsys, "search", str(path), "--export", "megatron", "--workers", "1")
    assert code == 0, err
    assert "pretrain_gpt.py" in out and "--global-batch-size 32" in out


def test_python_calls() -> None:
    imported = clustersim.import_config("megatron", ARGS.read_text())
    assert imported["request"]["model"]["num_layers"] == 32
    assert "--fp8-format hybrid" in clustersim.export_config("megatron", imported["request"])
    with pytest.raises(clustersim.InvalidRequest) as err:
        clustersim.import_config("hf", '{"architectures": ["Nope"]}')
    assert err.value.field == "input.architectures"


def test_http_routes(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as c:
        answer = c.post("/v1/imports/megatron", json={"text": ARGS.read_text()})
        assert answer.status_code == 200, answer.text
        request = answer.json()["request"]
        assert answer.json()["ignored"]["lr"] == "0.00015"
        exported = c.post("/v1/exports/megatron", json=request)
        assert exported.status_code == 200 and "--use-distributed-optimizer" in exported.json()["text"]
        bad = c.post("/v1/imports/megatron", json={"text": "pretrain_gpt.py --bogus 1"})
        assert bad.status_code == 422
        assert bad.json()["error"]["details"][0]["field"] == "input:1"
        zero3 = {**request, "layout": {**request["layout"], "zero_stage": 3}}
        refused = c.post("/v1/exports/megatron", json=zero3)
        assert refused.status_code == 422 and "DeepSpeed can" in refused.json()["error"]["details"][0]["rule"]


def test_inline_hf_config_over_http(tmp_path: Path) -> None:
    config = json.loads((DATA / "hf" / "qwen3-8b.json").read_text())
    doc = {"model": {"hf_config": config, "seq_length": 2048}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
           "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 8}}
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as c:
        assert c.post("/v1/simulations", json=doc).status_code == 200
        doc["model"]["hf_config"] = {"architectures": ["MiniMaxM1ForCausalLM"]}
        refused = c.post("/v1/simulations", json=doc)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "model.hf_config.architectures"


def test_export_deepspeed_then_import_the_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 2}\nlayout: {dp: 4, tp: 2, "
                    "pp: 2, microbatch_size: 2, global_batch_size: 64, zero_stage: 1, overlap_grad_reduce: true}\n")
    code, script, err = _cli(capsys, "export", "deepspeed", str(path))
    assert code == 0, err
    assert "cat > ds_config.json <<'EOF'" in script and "deepspeed --num_nodes 2 --num_gpus 8 pretrain_gpt.py" in script
    launch = tmp_path / "launch.sh"
    launch.write_text(script)
    code, again, err = _cli(capsys, "import", "deepspeed", str(launch), "--model", "gpt3-1.3b", "--cluster", "dgx-a100")
    assert code == 0, err
    assert yaml.safe_load(again)["layout"] == {**yaml.safe_load(path.read_text())["layout"], "precision": "bf16"}


@pytest.mark.slow
def test_export_from_a_saved_search_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "search.yaml"
    path.write_text("model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 1}\nglobal_batch_size: 32\n"
                    "bounds: {max_candidates: 6}\n")
    code, out, err = _cli(capsys, "search", str(path), "--json", "--workers", "1")
    assert code == 0, err
    saved = tmp_path / "result.json"
    saved.write_text(out)
    result = json.loads(out)
    assert result["problem"]["request"] == {"model": {"preset": "gpt3-1.3b"},
                                            "cluster": {"preset": "dgx-a100", "num_nodes": 1}}
    code, best, err = _cli(capsys, "export", "megatron", str(saved))
    assert code == 0, err
    code, from_search, err = _cli(capsys, "search", str(path), "--export", "megatron", "--workers", "1")
    assert code == 0 and best == from_search, err  # the same layout, the same command
    ranked = {t["rank"]: t["layout"] for t in result["top"]}
    for kind in ("megatron", "deepspeed"):
        code, out, err = _cli(capsys, "export", kind, str(saved), "--rank", str(len(ranked)))
        last = ranked[len(ranked)]
        if code == 0:
            assert f"--global-batch-size {last['global_batch_size']}" in out
            assert f"--micro-batch-size {last['microbatch_size']}" in out
        else:  # a layout the framework cannot run: exit 2, one line naming the field
            assert code == 2 and err.count("\n") == 1 and "layout." in err
    code, _out, err = _cli(capsys, "export", "megatron", str(saved), "--rank", str(len(ranked) + 1))
    assert code == 2 and "--rank" in err and f"between 1 and {len(ranked)}" in err
    del result["problem"]["request"]  # a result saved before results echoed the request
    saved.write_text(json.dumps(result))
    code, _out, err = _cli(capsys, "export", "megatron", str(saved))
    assert code == 2 and "problem.request" in err and err.count("\n") == 1


def test_a_saved_simulation_result_exports_the_request_it_echoes(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate` echoes its request, defaults written out, so its saved result exports as the request file does
    and runs again to the same figures; a result saved before results echoed their request is refused."""
    path = tmp_path / "run.yaml"
    path.write_text("model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 1}\nlayout: {dp: 4, tp: 2, "
                    "pp: 1, global_batch_size: 32, zero_stage: 1}\n")
    code, out, err = _cli(capsys, "simulate", str(path))
    assert code == 0, err
    result = json.loads(out)
    assert result["request"]["layout"]["zero_stage"] == 1 and "overlap_grad_reduce" in result["request"]["layout"]
    saved = tmp_path / "result.json"
    saved.write_text(out)
    for kind in ("megatron", "deepspeed"):
        code, from_result, err = _cli(capsys, "export", kind, str(saved))
        assert code == 0, err
        code, from_request, err = _cli(capsys, "export", kind, str(path))
        assert code == 0 and from_result == from_request
    again = tmp_path / "again.json"
    again.write_text(json.dumps(result["request"]))
    code, out2, err = _cli(capsys, "simulate", str(again))
    assert code == 0 and json.loads(out2)["iteration_time_s"] == result["iteration_time_s"]
    code, _out, err = _cli(capsys, "export", "deepspeed", str(saved), "--rank", "2")
    assert code == 2 and "--rank" in err
    del result["request"]  # saved before results echoed their request
    saved.write_text(json.dumps(result))
    code, _out, err = _cli(capsys, "export", "deepspeed", str(saved))
    assert code == 2 and "request" in err and "simulate it again" in err and err.count("\n") == 1
    code, _out, err = _cli(capsys, "export", "deepspeed", str(path), "--rank", "2")
    assert code == 2 and "--rank" in err


def test_http_deepspeed_export(tmp_path: Path) -> None:
    doc = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 1},
           "layout": {"dp": 8, "tp": 1, "pp": 1, "global_batch_size": 32, "zero_stage": 2}}
    with TestClient(create_app(Settings(database=str(tmp_path / "db.sqlite"))), base_url="http://localhost") as c:
        answer = c.post("/v1/exports/deepspeed", json=doc)
        assert answer.status_code == 200, answer.text
        assert '"stage": 2' in answer.json()["text"] and "--no-pipeline-parallel" in answer.json()["text"]
        doc["layout"].update(dp=4, pp=2)
        refused = c.post("/v1/exports/deepspeed", json=doc)
        assert refused.status_code == 422
        detail = refused.json()["error"]["details"][0]
        assert detail["field"] == "layout.zero_stage" and "torchtitan" in detail["rule"]
        back = c.post("/v1/imports/deepspeed", json={"text": answer.json()["text"], "model": "gpt3-1.3b",
                                                     "cluster": "dgx-a100"})
        assert back.status_code == 200, back.text
        assert back.json()["request"]["layout"]["zero_stage"] == 2
        yaml_body = yaml.safe_dump({**doc, "layout": {**doc["layout"], "dp": 8, "pp": 1}})
        answer = c.post("/v1/exports/megatron", content=yaml_body, headers={"content-type": "application/yaml"})
        assert answer.status_code == 422  # ZeRO 2: named, YAML read as POST /v1/simulations reads it
        assert answer.json()["error"]["details"][0]["field"] == "layout.zero_stage"
        typo = c.post("/v1/exports/deepspeed", content="model: {preset: gpt3-1.3b}\nlayuot: {}\n",
                      headers={"content-type": "application/yaml"})
        assert typo.status_code == 422
        assert "layuot" in [d["field"] for d in typo.json()["error"]["details"]]


def test_search_export_imports_back_to_the_best_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`search --export megatron` end to end: the command it prints imports back to the search's best layout."""
    from dataclasses import replace

    from api_schemas import SimulationRequest
    from service import convert

    path = tmp_path / "search.yaml"
    path.write_text("model: {preset: gpt3-1.3b}\ncluster: {preset: dgx-a100, num_nodes: 2}\nglobal_batch_size: 64\n"
                    "bounds: {max_candidates: 8}\n")
    code, out, err = _cli(capsys, "search", str(path), "--json", "--workers", "1")
    assert code == 0, err
    best = json.loads(out)["best"]
    code, command, err = _cli(capsys, "search", str(path), "--export", "megatron", "--workers", "1")
    assert code == 0, err
    back = SimulationRequest.model_validate(clustersim.import_config("megatron", command, cluster="dgx-a100")[
        "request"])
    searched = SimulationRequest.model_validate({"model": {"preset": "gpt3-1.3b"}, "cluster": {
        "preset": "dgx-a100", "num_gpus": best["num_gpus"]}, "layout": best["layout"]})
    lay, again = convert.to_scenario(searched).layout, convert.to_scenario(back).layout
    lay = replace(lay, async_tensor_model_parallel_allreduce=True,  # Megatron-Core's, always
                  sequence_parallel=lay.sequence_parallel and lay.tp > 1,
                  placement="tp,cp,dp,pp" if lay.placement == "tp,dp,pp" else lay.placement)
    assert again == lay
    assert convert.to_scenario(back).cluster.num_gpus == best["num_gpus"]
