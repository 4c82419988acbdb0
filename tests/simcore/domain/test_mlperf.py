"""MLPerf time-to-train's closed forms: the RCP checker's olympic mean, its pruning and interpolation between batch
sizes, the steps and evaluations of a run (with the evaluations the rules skip), and the benchmarks and versions
the shipped reference holds."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from simcore.calibration.mlperf_rcps import BENCHMARKS, mlperf_benchmark, versions
from simcore.domain.mlperf import MlperfBenchmark, eval_time_s, expected_samples, olympic_mean, plan
from simcore.errors import SpecError


def test_olympic_mean_drops_the_fastest_and_the_slowest_run() -> None:
    # the rules' appendix example: [16, 14, 16, 17, 16, 16, 15, 16, 15, 16] -> mean 15.75
    assert olympic_mean((16, 14, 16, 17, 16, 16, 15, 16, 15, 16)) == 15.75


def test_lora_at_batch_8_reads_its_rcp_and_skips_the_first_evaluations() -> None:
    lora = mlperf_benchmark("llama2_70b_lora", "5.1")
    runs = dict(lora.rcps)[8]
    assert len(runs) == 20 and olympic_mean(runs) == sum(sorted(runs)[1:-1]) / 18
    p = plan(lora, 8, step_time_s=2.0, eval_time_s=10.0)
    assert p.samples == olympic_mean(runs) and not p.rcp_interpolated
    assert p.steps == math.ceil(p.samples / 8)
    every = 384 // 8  # an evaluation every 384 samples
    assert p.evaluations == math.ceil(p.steps / every) - math.floor(0.125 * 8 + 2)
    assert p.time_to_train_s == p.steps * 2.0 + p.evaluations * 10.0
    assert p.time_to_train_min == p.time_to_train_s / 60


def test_a_published_runs_steps_and_evaluations() -> None:
    # NVIDIA's v5.1 LoRA runs on 8 GB200 (batch 8) stopped at 3,072 samples after 5 evaluations: the closed form on
    # a benchmark whose only RCP converges at exactly 3,072 gives the same counts
    lora = mlperf_benchmark("llama2_70b_lora", "5.1")
    one = MlperfBenchmark("llama2_70b_lora", "5.1", 8192, ((8, (3072.0,) * 3),), 384, 173, lora.skip_evaluations)
    p = plan(one, 8, 1.0, 1.0)
    assert (p.steps, p.evaluations) == (384, 5)
    # and Llama 3.1 8B's at batch 16, stopped at 184,320 samples after 15 evaluations (every 12,288, none skipped)
    one = MlperfBenchmark("llama31_8b", "5.1", 8192, ((16, (184320.0,) * 3),), 12288, 1024)
    p = plan(one, 16, 1.0, 1.0)
    assert (p.steps, p.evaluations) == (11520, 15)


def test_a_batch_between_two_rcps_interpolates_their_means() -> None:
    bench = mlperf_benchmark("llama31_405b", "5.1")
    means = {b: olympic_mean(runs) for b, runs in bench.rcps}
    samples, interpolated = expected_samples(bench, 3456)
    assert interpolated and samples == pytest.approx((means[2304] + means[4608]) / 2)


def test_pruning_drops_a_point_slower_than_its_neighbours_interpolation() -> None:
    # 32 converges slower than the line from 16 to 64: the checker prunes it, so 24 interpolates 16..64
    bench = MlperfBenchmark("x", "1", 8, ((16, (100.0,) * 3), (32, (400.0,) * 3), (64, (300.0,) * 3)), 10, 1)
    assert expected_samples(bench, 24)[0] == pytest.approx(100 + 200 * 8 / 48)
    assert expected_samples(bench, 32)[0] == 400  # an exact RCP is its own mean


def test_a_batch_above_the_rcps_names_the_nearest() -> None:
    bench = mlperf_benchmark("llama31_8b", "5.1")
    with pytest.raises(SpecError) as err:
        plan(bench, 4096, 1.0, 1.0)
    assert err.value.field == "layout.global_batch_size" and "nearest: 128" in err.value.rule


def test_a_batch_below_the_rcps_takes_the_smallest_batchs_rcp_as_the_checker_does() -> None:
    # rcp_checker.check_directory: no RCP at or below the batch -> judged against _find_min_rcp's record
    bench = mlperf_benchmark("llama31_405b", "5.0")
    smallest = min(bench.rcps)
    assert smallest[0] == 1008
    assert expected_samples(bench, 448) == (olympic_mean(smallest[1]), False)
    assert plan(bench, 448, 1.0, 0.0).steps == math.ceil(olympic_mean(smallest[1]) / 448)


def test_gpt3_rcps_are_tokens_read_as_samples() -> None:
    bench = mlperf_benchmark("gpt3", "4.1")
    raw = json.loads(resources.files("simcore.calibration").joinpath("reference/mlperf-rcps.json").read_text())
    tokens = raw["benchmarks"]["gpt3"]["rcps"]["4.1"]["1536"]
    assert dict(bench.rcps)[1536] == tuple(t / 2048 for t in tokens)
    assert bench.eval_interval_samples == 24576 and bench.starts_from_checkpoint


def test_every_benchmark_has_versions_and_bad_names_are_refused() -> None:
    assert {b: versions(b) for b in BENCHMARKS} == {
        "gpt3": ("3.1", "4.0", "4.1"), "llama31_8b": ("5.1",), "llama31_405b": ("5.0", "5.1"),
        "llama2_70b_lora": ("4.0", "4.1", "5.0", "5.1")}
    assert mlperf_benchmark("llama31_405b", "5.0").eval_interval_samples == 46080
    assert mlperf_benchmark("llama31_405b", "5.1").skip_evaluations == (0.0026, 12)
    with pytest.raises(SpecError) as err:
        mlperf_benchmark("bert", "5.1")
    assert err.value.field == "training.mlperf.benchmark"
    with pytest.raises(SpecError) as err:
        mlperf_benchmark("llama31_8b", "5.0")
    assert err.value.field == "training.mlperf.version" and "5.1" in err.value.rule


def test_an_evaluation_is_forward_only_pipelines_of_whole_global_batches() -> None:
    # 1,024 samples in steps of the global batch 64 on 8 replicas of 2 per microbatch: 16 steps of 4 microbatches,
    # each step filling and draining the 4 stages, the slowest 0.1 s
    assert eval_time_s([0.05, 0.1, 0.08, 0.07], 16, 4, 1024, 64) == pytest.approx(16 * (4 + 3) * 0.1)
    # with 2 model chunks a stage the fill takes half a stage's forward per stage
    assert eval_time_s([0.05, 0.1, 0.08, 0.07], 16, 4, 1024, 64, 2) == pytest.approx(16 * (4 + 1.5) * 0.1)
    # 173 samples at a global batch of 16: 11 steps of one microbatch (the last one a whole step)
    assert eval_time_s([0.2], 16, 1, 173, 16) == pytest.approx(11 * 0.2)
    # gpt3's 5,660 samples at a global batch of 2,048 on 16 replicas: 3 steps of 128 microbatches through 8 stages
    assert eval_time_s([1.0] * 8, 16, 8, 5660, 2048) == pytest.approx(3 * (128 + 7) * 1.0)
