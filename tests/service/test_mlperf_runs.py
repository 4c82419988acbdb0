"""NVIDIA's published MLPerf Training LLM runs (simcore/calibration/reference/mlperf-results.json, written by
bench/mlperf_results.py): every run is a request the contract accepts and simulates at its published layout (none
refused), and validate's MLPerf table (service/mlperf_table.py) is the one docs/accuracy.md carries."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from service.mlperf_table import current_section, render_markdown, render_mlperf_table, run_mlperf_validation
from simcore.calibration.mlperf_runs import request_for, runs
from simcore.simulate import simulate

ACCURACY = Path(__file__).resolve().parents[2] / "docs" / "accuracy.md"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """validate's MLPerf section (every run simulated once), shared by the tests that read it."""
    return run_mlperf_validation()


def test_the_reference_spans_the_four_benchmarks_and_the_gpus_with_sources() -> None:
    rows = runs()
    assert len(rows) >= 20
    assert set(Counter(r["benchmark"] for r in rows)) == {"gpt3", "llama31_8b", "llama31_405b", "llama2_70b_lora"}
    assert {r["cluster_preset"] for r in rows} >= {"dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "gb300-nvl72",
                                                   "l40s-pcie"}
    for r in rows:
        assert r["source"]["results"].startswith(f"mlcommons/training_results_v{r['version']} @")
        assert "/config_" in r["source"]["config"]
        assert r["time_to_train_min"] > 0 and r["layout"]["dp"] * r["layout"]["tp"] * r["layout"]["pp"] \
            * r["layout"]["cp"] == r["num_gpus"]


@pytest.mark.parametrize("run", runs(), ids=lambda r: r["id"])
def test_every_published_run_is_expressible_and_simulates(run: dict) -> None:
    body = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(request_for(run)))))
    ml = body["training"]["mlperf"]
    assert ml["benchmark"] == run["benchmark"] and ml["version"] == run["version"]
    assert ml["time_to_train_min"] > 0 and ml["steps"] > 0
    assert ml["steps"] * run["layout"]["global_batch"] >= ml["samples"]


def test_lora_and_the_405b_asymmetric_pipeline_are_described_as_published() -> None:
    by_id = {r["id"]: r for r in runs()}
    lora = request_for(by_id["v4.0-llama2_70b_lora-l40s_n16"])
    assert lora["model"]["lora"] == {"rank": 16, "targets": ["qkv", "proj"], "dropout": 0.1}
    assert lora["model"]["seq_length"] == 8192 and lora["cluster"]["gpus_per_node"] == 4
    big = request_for(by_id["v5.0-llama31_405b-eos-dfw_n1024"])["layout"]
    assert big["virtual_stages"] == 8 and len(big["stage_layers"]) == 64 and sum(big["stage_layers"]) == 126
    assert big["stage_layers"][0] == big["stage_layers"][-1] == 1


def test_nvl72_runs_are_trays_in_rack_domains_with_the_configs_data_parallel_dtypes() -> None:
    by_id = {r["id"]: r for r in runs()}
    run = by_id["v5.1-llama31_8b-tyche_ngpu512"]  # Tyche (8x NVIDIA GB200 NVL72), SEGMENT=16 trays
    request = request_for(run)
    assert request["cluster"] == {"preset": "gb200-nvl72", "num_gpus": 512, "gpus_per_node": 4, "nics_per_node": 4,
                                  "nvlink_domain_gpus": 64}
    assert request["layout"]["grad_reduce_dtype"] == "bf16" and request["layout"]["fp8_param_gather"] is True
    scenario = convert.to_scenario(SimulationRequest.model_validate(request))
    assert scenario.cluster.domain_gpus == 64 and scenario.cluster.domain_nics == 64
    assert request_for(by_id["v5.1-llama31_8b-tyche_ngpu72"])["cluster"]["nvlink_domain_gpus"] == 72
    # NVFP4 runs gather 16-bit parameters (config_common_fp4.sh: FP8_PARAM_GATHER=False); LoRA keeps ZeRO 0
    assert "fp8_param_gather" not in request_for(by_id["v5.1-llama31_405b-hsg_ngpu5120"])["layout"]
    lora = request_for(by_id["v5.1-llama2_70b_lora-tyche_ngpu512"])["layout"]
    assert "grad_reduce_dtype" not in lora and "fp8_param_gather" not in lora
    # H100 nodes are their own NVLink domain
    assert "nvlink_domain_gpus" not in request_for(by_id["v5.0-llama31_405b-eos-dfw_n64"])["cluster"]


def test_context_parallel_exchange_and_fp8_attention_as_the_runs_had_them() -> None:
    """The LoRA configs of v5.x default cp_comm_type to a2a; the others leave Megatron-Core's p2p. v4.0's LoRA
    implementation builds Transformer Engine v1.6rc2, whose context-parallel attention is 16-bit, so its CP runs
    have no FP8 attention although FP8_DPA=1; its one-node run (no CP) keeps it."""
    by_id = {r["id"]: r for r in runs()}
    for name in ("v5.0-llama2_70b_lora-tyche_ngpu72", "v5.1-llama2_70b_lora-theia_ngpu512"):
        assert request_for(by_id[name])["layout"]["cp_comm"] == "a2a"
    assert request_for(by_id["v5.1-llama31_8b-tyche_ngpu512"])["layout"]["cp_comm"] == "p2p"
    assert "cp_comm" not in request_for(by_id["v5.0-llama2_70b_lora-tyche_ngpu8"])["layout"]  # cp 1
    assert by_id["v4.0-llama2_70b_lora-eos_n8"]["layout"]["fp8_attention"] is False
    assert by_id["v4.0-llama2_70b_lora-eos"]["layout"]["fp8_attention"] is True
    assert by_id["v5.1-llama2_70b_lora-tyche_ngpu72"]["layout"]["fp8_attention"] is True


def test_config_conditions_and_the_fp8_weight_cache_as_the_runs_had_them() -> None:
    """v4.x gpt3 configs source config_common.sh in the else of an MLPERF_VERSION test: its FP8_PARAMS=True is read.
    NeMo 1's LoRA configs (v4.0, v4.1) set disable_parameter_transpose_cache: their rows run without the FP8 weight
    cache; v5.x's LoRA and every pretraining row keep it."""
    by_id = {r["id"]: r for r in runs()}
    for name in ("v4.0-gpt3-eos_n64", "v4.1-gpt3-eos_n32", "v4.1-gpt3-eos-dfw_n1452"):
        assert request_for(by_id[name])["layout"]["fp8_param_gather"] is True
    assert "fp8_param_gather" not in request_for(by_id["v3.1-gpt3-eos_n64"])["layout"]  # v3.1: no FP8_PARAMS
    uncached = {r["id"] for r in runs() if request_for(r)["layout"].get("fp8_weight_cache") is False}
    assert uncached == {r["id"] for r in runs() if r["benchmark"] == "llama2_70b_lora" and r["version"] in ("4.0",
                                                                                                          "4.1")}


def test_validate_prints_the_mlperf_table_and_the_docs_carry_it(report: dict[str, Any]) -> None:
    assert report["refused"] == [] and len(report["cases"]) == len(runs())
    text = render_mlperf_table(report)
    assert "MLPerf runs (not fitted): time-to-train over" in text and "mean |error|" in text
    errors = [abs(c["ttt_error_pct"]) for c in report["cases"]]
    assert report["time_to_train"]["max_abs_error_pct"] == pytest.approx(max(errors))
    assert current_section(ACCURACY.read_text(encoding="utf-8")) == render_markdown(report), \
        "stale MLPerf table: run python bench/mlperf_table.py"


def _range(errors: list[float]) -> str:
    """'+a% to +b%': a range of step errors (%), rounded, as the accuracy notes write it."""
    low, high = round(min(errors)), round(max(errors))
    return f"{low:+d}% to {high:+d}%"


def test_the_accuracy_notes_quote_the_current_mlperf_figures(report: dict[str, Any]) -> None:
    """The figures of docs/accuracy.md's reading of the MLPerf table (the notes after it) are the current code's:
    the 512-GPU Llama 3.1 8B rows' step errors, the LoRA CP 8 rows' on 72 and on 512 GB200/GB300 GPUs, and their
    peak memory; the v4.0 and v4.1 LoRA TP 4 x CP 2 rows' step errors on H100; gpt3's time-to-train against step
    time errors, and that each row's holds as written (v3.1 and v4.1's B200 run both fast, time-to-train the more;
    v4.1's 256 and 512 H100s both slow, step time the more)."""
    cases = report["cases"]
    notes = ACCURACY.read_text(encoding="utf-8").split("What the MLPerf table shows", 1)[1]
    fast = [-c["step_error_pct"] for c in cases if c["benchmark"] == "llama31_8b" and c["gpus"] == 512]
    assert f"comes out {round(min(fast))}-{round(max(fast))}% fast" in notes
    lora = {gpus: [c["step_error_pct"] for c in cases if c["benchmark"] == "llama2_70b_lora"
                   and c["version"] == "5.1" and c["gpus"] == gpus] for gpus in (72, 512)}
    assert f"(v5.1: {_range(lora[72])} step time; {_range(lora[512])} on 512)".replace(
        " ", "") in notes.replace("\n", "").replace(" ", "")
    run = next(r for r in runs() if r["id"] == "v5.1-llama2_70b_lora-theia_ngpu72")
    body = convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(request_for(run)))))
    assert f"about {round(body['memory']['peak_gib_per_gpu'])} GiB a GPU" in notes
    prose = " ".join(notes.split())

    def fast_range(rows: list[dict[str, Any]], key: str = "step_error_pct") -> str:
        """'a-b': the rows' errors, all fast, as whole percents."""
        assert rows and all(c[key] < 0 for c in rows), rows
        return f"{round(min(-c[key] for c in rows))}-{round(max(-c[key] for c in rows))}"

    tp4_cp2 = {version: [c for c in cases if c["benchmark"] == "llama2_70b_lora" and c["version"] == version
                      and c["gpu"] == "dgx-h100" and c["gpus"] in (64, 1024)] for version in ("4.0", "4.1")}
    assert [len(rows) for rows in tp4_cp2.values()] == [2, 2]
    assert f"(v4.0) comes out {fast_range(tp4_cp2['4.0'])}% fast on step time; v4.1's same layouts come out " \
           f"{fast_range(tp4_cp2['4.1'])}% fast" in prose
    gpt3 = [c for c in cases if c["benchmark"] == "gpt3" and c["step_error_pct"] is not None]
    v31 = [c for c in gpt3 if c["version"] == "3.1"]
    b200 = [c for c in gpt3 if c["version"] == "4.1" and c["gpu"] == "dgx-b200"]
    h100 = sorted((c for c in gpt3 if c["version"] == "4.1" and c["gpu"] == "dgx-h100"), key=lambda c: c["gpus"])
    assert len(v31) + len(b200) + len(h100) == len(gpt3) and len(b200) == 1
    assert all(c["ttt_error_pct"] < c["step_error_pct"] < 0 for c in v31 + b200), v31 + b200
    assert all(c["step_error_pct"] > c["ttt_error_pct"] > 0 for c in h100), h100
    one = b200[0]
    assert f"gpt3** on v3.1 errs more in time-to-train than in step time ({fast_range(v31, 'ttt_error_pct')}% " \
           f"fast against {fast_range(v31)}%), as v4.1's B200 run does ({round(-one['ttt_error_pct'])}% against " \
           f"{round(-one['step_error_pct'])}%)" in prose
    gpus = " and ".join(str(c["gpus"]) for c in h100)
    step, ttt = (" and ".join(f"{c[key]:+.1f}%" for c in h100) for key in ("step_error_pct", "ttt_error_pct"))
    assert f"v4.1's runs on {gpus} H100s come out slow in both, more in step time ({step}) than in time-to-train " \
           f"({ttt})" in prose


def test_nvfp4_trains_llama31_405b_on_gb200_faster_than_fp8_at_the_published_layout() -> None:
    """Issue 37's check: the v5.1 Llama 3.1 405B run on 512 GB200s (NVFP4) against the same layout in FP8, delayed
    or current scaling: faster, and by less than the FP4/FP8 peak ratio (2x: only the projections' GEMMs run in
    FP4, and NVFP4 adds its own quantization)."""
    run = next(r for r in runs() if r["id"] == "v5.1-llama31_405b-tyche_ngpu512")
    nvfp4 = request_for(run)
    assert nvfp4["layout"]["precision"] == "nvfp4"

    def seconds(doc: dict[str, Any]) -> float:
        return simulate(convert.to_scenario(SimulationRequest.model_validate(doc))).metrics.iteration_time_s

    fp4 = seconds(nvfp4)
    for scaling in (None, "current"):
        fp8 = {**nvfp4, "layout": {**nvfp4["layout"], "precision": "fp8",
                                   **({"fp8_scaling": scaling} if scaling else {})}}
        assert 1.0 < seconds(fp8) / fp4 < 2.0
