"""Layout search through its documents: ranking by simulated tokens/s with the reasons, discarded families, the
bounds, the executors' agreement, the baseline, input errors, the CLI, and the 1T acceptance case (a bounded
search beats Narayanan et al.'s DP 6 x TP 8 x PP 64). The space, pruning and the estimate on their own:
tests/simcore/planning/."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from api_schemas import LayoutIn, RequestError, SimulationRequest
from api_schemas.search import parse_search_request, search_request_from
from service import convert as adapters
from service.cli.main import main
from service.convert import layout_json, to_space
from service.search import run_search
from simcore import Layout, Recompute, Scenario, Schedule, SpecError, simulate
from simcore.planning.executor import ExecutorError
from simcore.planning.space import Space

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

ROOT = Path(__file__).resolve().parents[2]
ONE_T = ROOT / "examples" / "gpt-1t-3072-a100.yaml"

# GPT-3 1.3B on two DGX A100 nodes: a space of a few thousand layouts, each simulated in milliseconds.
SMALL: dict[str, Any] = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "dgx-a100", "num_nodes": 2},
                         "global_batch_size": 64}


def scenario_of(doc: dict[str, Any]) -> Scenario:
    return adapters.to_scenario(SimulationRequest.model_validate(
        {"model": doc["model"], "cluster": doc["cluster"],
         "layout": {"dp": 1, "tp": 1, "pp": 1, "global_batch_size": doc["global_batch_size"]}}))


def without_run(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "run"}


# -- the search ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_result() -> dict[str, Any]:
    return run_search({**SMALL, "bounds": {"max_candidates": 30, "top_k": 4}}, workers=1)


def test_search_ranks_by_simulated_throughput_and_explains(small_result: dict[str, Any]) -> None:
    r = small_result
    s = r["search"]
    assert s["generated"] == s["pruned"] + s["feasible"]
    assert s["pruned"] == s["discarded"]["invalid"] + s["discarded"]["memory"]
    # Only what can still win is simulated: the search proved its best before the 30 it was allowed.
    assert s["simulated"] < 30 and s["stopped_by"] == "proven_best" and s["could_win"] == 0
    assert s["not_simulated"] == s["feasible"] - s["simulated"]
    assert s["estimate_error"] and all(k["bound_low"] <= k["ratio_min"] for k in s["estimate_error"])
    top = r["top"]
    assert [e["rank"] for e in top] == [1, 2, 3, 4] and r["best"] == top[0]
    speeds = [e["tokens_per_s"] for e in top]
    assert speeds == sorted(speeds, reverse=True)
    base = scenario_of(SMALL)
    for entry in top:
        # each ranked figure is the simulator's for that layout, which is a valid request layout
        layout = adapters.to_scenario(SimulationRequest(
            model=SMALL["model"], cluster=SMALL["cluster"], layout=LayoutIn(**entry["layout"]))).layout
        assert simulate(replace(base, layout=layout)).metrics.tokens_per_s == entry["tokens_per_s"]
        assert entry["memory"]["fits"] and entry["memory"]["headroom_gib"] > 0
        assert set(entry["exposed_communication_s"]) == {"tp", "pp", "dp"}
        why = " | ".join(entry["why"])
        assert "bubble" in why and "exposed communication" in why and "headroom" in why
    assert "fewer tokens/s than the best" in top[1]["why"][-1]


def test_discarded_families_give_their_first_reason() -> None:
    # GPT-3 6.7B on 16 GPUs without ZeRO or recomputation: TP 1 x PP 1 cannot hold it; TP 3 breaks the rules
    r = run_search({**SMALL, "model": {"preset": "gpt3-6.7b"},
                    "space": {"tp": [1, 3, 8], "zero_stage": [0], "recompute": ["none"]},
                    "bounds": {"max_candidates": 2}}, workers=1)
    families = {(f["family"]["dp"], f["family"]["tp"], f["family"]["pp"]): f for f in r["discarded_families"]}
    no_fit = families[(16, 1, 1)]
    assert no_fit["kind"] == "memory"
    assert no_fit["reason"].startswith("memory: stage 0 needs ") and "GiB more than the 80 GiB" in no_fit["reason"]
    assert no_fit["family"] == {"dp": 16, "tp": 1, "pp": 1, "zero_stage": 0, "recompute": "none",
                                "sequence_parallel": False}
    rule = [f for (dp, tp, pp), f in families.items() if tp == 3]
    assert rule and rule[0]["kind"] == "invalid" and rule[0]["reason"].startswith("layout.dp: dp*tp*pp")
    assert r["search"]["discarded"]["invalid"] >= 1


def test_time_limit_stops_starting_simulations() -> None:
    r = run_search({**SMALL, "bounds": {"max_candidates": 10000, "time_limit_s": 0.001}}, workers=1)
    assert r["search"]["stopped_by"] == "time_limit"
    assert 1 <= r["search"]["simulated"] < r["search"]["feasible"]  # at least one candidate is always simulated


def test_arguments_override_the_request_bounds() -> None:
    r = run_search({**SMALL, "bounds": {"max_candidates": 50, "top_k": 5}}, max_candidates=3, top_k=2, workers=1)
    assert r["search"]["simulated"] == 3 and len(r["top"]) == 2


def test_local_pool_and_inline_give_identical_results(small_result: dict[str, Any]) -> None:
    pooled = run_search({**SMALL, "bounds": {"max_candidates": 30, "top_k": 4}}, workers=2)
    assert pooled["run"]["executor"] == "local" and pooled["run"]["workers"] == 2
    assert without_run(pooled) == without_run(small_result)
    # and the same bytes once serialized
    assert json.dumps(without_run(pooled)) == json.dumps(without_run(small_result))


def test_search_around_a_simulation_request_compares_with_its_layout() -> None:
    doc = {**{k: v for k, v in SMALL.items() if k != "global_batch_size"},
           "layout": {"dp": 2, "tp": 4, "pp": 2, "global_batch_size": 64}}
    request = search_request_from(doc)
    assert request.global_batch_size == 64 and request.baseline is not None
    r = run_search(request, max_candidates=5, workers=1)
    baseline = r["baseline"]
    assert baseline["layout"]["dp"] == 2 and baseline["best_speedup"] == pytest.approx(
        r["best"]["tokens_per_s"] / baseline["tokens_per_s"])


@pytest.mark.parametrize("doc, field", [
    ({**SMALL, "space": {"tpp": [2]}}, "space.tpp"),
    ({**SMALL, "space": {"tp": []}}, "space.tp"),
    ({**SMALL, "space": {"placement": ["tp,dp"]}}, "space.placement"),
    ({**SMALL, "bounds": {"max_candidates": 0}}, "bounds.max_candidates"),
    ({**SMALL, "global_batch_size": "64"}, "global_batch_size"),
    ({**SMALL, "baseline": {"dp": 2, "tp": 4, "pp": 2, "global_batch_size": 32}}, "baseline"),
])
def test_invalid_search_requests_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(RequestError) as err:
        parse_search_request(json.dumps(doc))
    assert err.value.details[0].field == field


def test_domain_errors_are_spec_errors_and_executor_errors_are_not() -> None:
    with pytest.raises(SpecError) as err:
        run_search({**SMALL, "model": {"preset": "gpt-9t"}})
    assert err.value.field == "model.preset"
    with pytest.raises(SpecError) as err:
        run_search({**SMALL, "baseline": {"dp": 3, "tp": 4, "pp": 2, "global_batch_size": 64}})
    assert err.value.field == "baseline.dp"
    with pytest.raises(ExecutorError) as executor_err:
        run_search(SMALL, executor="slurm")
    assert executor_err.value.option == "executor" and not isinstance(executor_err.value, SpecError)


def test_layout_json_round_trips_through_the_request_schema() -> None:
    layout = Layout(dp=2, tp=4, pp=2, microbatch_size=2, global_batch_size=64, virtual_stages=3,
                    schedule=Schedule.INTERLEAVED_1F1B, zero_stage=1, recompute=Recompute.SELECTIVE)
    doc = {"model": SMALL["model"], "cluster": SMALL["cluster"], "layout": layout_json(layout)}
    assert adapters.to_scenario(SimulationRequest.model_validate(doc)).layout == layout
    assert to_space(search_request_from(SMALL).space) == Space()
    asynchronous = replace(layout, async_tensor_model_parallel_allreduce=True)
    doc["layout"] = layout_json(asynchronous)
    assert doc["layout"]["async_tensor_model_parallel_allreduce"] is True
    assert adapters.to_scenario(SimulationRequest.model_validate(doc)).layout == asynchronous


# -- CLI -------------------------------------------------------------------------------------------------------


def test_cli_search_prints_tables_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "model": {"preset": "gpt3-6.7b"}}), encoding="utf-8")
    assert main(["search", str(path), "--max-candidates", "6", "--top", "3", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "Fastest layouts" in out and "Best: DP" in out and "Discarded families" in out
    assert main(["search", str(path), "--json", "--max-candidates", "4", "--top", "2", "--workers", "1"]) == 0
    result = json.loads(capsys.readouterr().out)  # nothing but the JSON on stdout (progress goes to stderr)
    assert len(result["top"]) == 2 and result["search"]["simulated"] == 4


def test_cli_search_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "space": {"zero": [1]}}), encoding="utf-8")
    assert main(["search", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "space.zero: unknown field" in err
    with pytest.raises(SystemExit) as exit_:
        main(["search", str(path), "--top", "0"])
    assert exit_.value.code == 2
    assert main(["search", str(tmp_path / "missing.yaml")]) == 2


def test_cli_search_screens_candidates_over_the_job_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "space": {"tp": [2], "zero_stage": [1], "recompute": ["selective"]}}),
                    encoding="utf-8")
    monkeypatch.setenv("CLUSTERSIM_MAX_JOB_EVENTS", "300")  # the service would not simulate the larger ones
    argv = ["search", str(path), "--json", "--max-candidates", "2", "--workers", "1"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["search"]["simulated"] == 2 and result["search"]["screened"] > 0
    assert all(entry["estimated_events"] > 300 for entry in result["screened"])
    assert main([*argv, "--no-limits"]) == 0  # lifted: nothing screened
    lifted = json.loads(capsys.readouterr().out)
    assert lifted["search"]["screened"] == 0 and lifted["screened"] == []
    assert main(argv[:2] + ["--max-candidates", "2", "--workers", "1"]) == 0  # the tables say what was screened
    assert "screened, not simulated (over the limits; --no-limits simulates them)" in capsys.readouterr().out


# -- acceptance: the 1T GPT on 3072 A100s ---------------------------------------------------------------------


def test_1t_search_beats_the_published_layout() -> None:
    """Bounded for CI: TP 8 with sequence parallelism, ZeRO 0/1, selective or full recomputation (every pp, dp,
    microbatch size, schedule, interleaving and placement generated), 3 candidates simulated. The published
    layout (DP 6 x TP 8 x PP 64, microbatch 1, 1F1B, full recomputation) is the baseline, simulated too."""
    doc = yaml.safe_load(ONE_T.read_text(encoding="utf-8"))
    doc["space"] = {"tp": [8], "zero_stage": [0, 1], "recompute": ["selective", "full"], "sequence_parallel": [True]}
    r = run_search(doc, max_candidates=3, workers=2)
    baseline, best = r["baseline"], r["best"]
    assert baseline["summary"].startswith("DP 6 x TP 8 x PP 64, mb 1, 1f1b")
    assert best["tokens_per_s"] >= baseline["tokens_per_s"]
    assert baseline["best_speedup"] >= 1.0
    assert best["memory"]["fits"] and r["search"]["pruned"] > 0
    assert len(best["why"]) >= 4 and "bubble" in best["why"][0]


# -- precision ---------------------------------------------------------------------------------------------------


def test_search_tries_fp8_where_the_gpu_has_it_and_discards_it_where_not() -> None:
    space = {"dp": [2], "tp": [8], "pp": [1], "microbatch_size": [4], "zero_stage": [1], "recompute": ["none"],
             "sequence_parallel": [True], "placement": ["tp,dp,pp"], "precision": ["bf16", "fp8"],
             "fp8_recipe": ["tensorwise", "blockwise"]}
    h100 = run_search({**SMALL, "cluster": {"preset": "dgx-h100", "num_nodes": 2}, "space": space,
                       "bounds": {"top_k": 3}}, workers=1)
    ranked = [(e["layout"]["precision"], e["layout"].get("fp8_recipe")) for e in h100["top"]]
    assert sorted(ranked) == [("bf16", None), ("fp8", "blockwise"), ("fp8", "tensorwise")]
    assert ranked[0][0] == "fp8"  # the FP8 GEMMs make it faster
    h100_cluster = {"preset": "dgx-h100", "num_nodes": 2}
    check = SimulationRequest.model_validate({"model": SMALL["model"], "cluster": h100_cluster,
                                              "layout": h100["best"]["layout"]})
    assert simulate(adapters.to_scenario(check)).metrics.tokens_per_s == h100["best"]["tokens_per_s"]
    a100 = run_search({**SMALL, "space": space, "bounds": {"top_k": 3}}, workers=1)
    assert [e["layout"]["precision"] for e in a100["top"]] == ["bf16"]
    assert a100["search"]["discarded"]["invalid"] == 2  # the two FP8 layouts: A100 has no FP8 tensor cores


def test_search_tries_each_fp8_scaling_of_the_tensorwise_recipe_and_delayed_wins() -> None:
    """space.fp8_scaling (docs/contract-fp8-scaling.md): tried where the recipe is tensorwise only; current scaling's
    amax passes make it the slower of the two, and a layout found runs as simulated on its own."""
    space = {"dp": [2], "tp": [8], "pp": [1], "microbatch_size": [4], "zero_stage": [1], "recompute": ["none"],
             "sequence_parallel": [True], "placement": ["tp,dp,pp"], "precision": ["fp8"],
             "fp8_recipe": ["tensorwise", "blockwise"], "fp8_scaling": ["delayed", "current"]}
    r = run_search({**SMALL, "cluster": {"preset": "dgx-h100", "num_nodes": 2}, "space": space,
                    "bounds": {"top_k": 4}}, workers=1)
    ranked = [(e["layout"].get("fp8_recipe"), e["layout"].get("fp8_scaling")) for e in r["top"]]
    assert sorted(ranked, key=str) == sorted([("tensorwise", None), ("tensorwise", "current"), ("blockwise", None)],
                                             key=str)
    assert ranked.index(("tensorwise", None)) < ranked.index(("tensorwise", "current"))
    current = next(e for e in r["top"] if e["layout"].get("fp8_scaling") == "current")
    assert "current scaling" in current["summary"]
    check = SimulationRequest.model_validate({"model": SMALL["model"], "cluster": {"preset": "dgx-h100",
                                              "num_nodes": 2}, "layout": current["layout"]})
    assert simulate(adapters.to_scenario(check)).metrics.tokens_per_s == current["tokens_per_s"]
