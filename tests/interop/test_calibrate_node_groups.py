"""A GEMM sweep on a heterogeneous cluster (cluster.node_groups) applies to the groups of the GPU it ran on
(`cluster.measured.gemm.gpu`, `clustersim calibrate --gemm-gpu`); the other groups keep the model's GEMM times. With
groups of several GPUs the sweep must name its GPU, and a GPU the cluster does not have is refused, naming
`cluster.measured.gemm.gpu` (exit 2 / HTTP 422)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clustersim
from service.cli.main import main
from simcore.cost.compute.gemm_ceilings import CEILING_FLOPS_PER_S

# stage 0 on the A100 node, stage 1 on the H100 node (placement tp,dp,pp), layers split evenly; TP 1, so that
# the layers' GEMMs are of the sizes the sweep measured
MIXED = {"model": {"preset": "gpt3-1.3b"},
         "cluster": {"preset": "dgx-a100", "node_groups": [{"num_nodes": 1, "gpu": "a100-80gb"},
                                                           {"num_nodes": 1, "gpu": "h100-80gb"}]},
         "layout": {"dp": 8, "tp": 1, "pp": 2, "microbatch_size": 4, "global_batch_size": 64,
                    "placement": "tp,dp,pp"}}


def _sweep(tflops: float) -> str:
    powers = [2**i for i in range(10, 17)]
    rows = [f"{m},{n},{k},bf16,{tflops}" for m in powers for n in powers for k in powers]
    return "m,n,k,dtype,tflops\n" + "\n".join(rows) + "\n"


def _with(overlay: dict) -> dict:
    return {**MIXED, "cluster": {**MIXED["cluster"], "measured": overlay}}


def test_a_sweep_applies_to_the_groups_of_its_gpu(tmp_path: Path) -> None:
    (tmp_path / "gemm.csv").write_text(_sweep(0.7 * CEILING_FLOPS_PER_S["h100-80gb"]["bf16"] / 1e12))
    overlay = clustersim.calibrate(gemm=tmp_path / "gemm.csv", gemm_gpu="h100-80gb")
    assert overlay["gemm"]["gpu"] == "h100-80gb"
    plain = clustersim.simulate(MIXED).model_dump()
    slow = clustersim.simulate(_with(overlay)).model_dump()
    a100, h100 = (s["gpu"] for s in plain["stages"])
    assert (a100, h100) == ("a100-80gb", "h100-80gb")
    assert slow["stages"][0]["forward_s"] == plain["stages"][0]["forward_s"]  # the A100 stage: the model's GEMMs
    assert slow["stages"][1]["forward_s"] > 1.03 * plain["stages"][1]["forward_s"]  # the H100 stage: measured
    assert slow["stages"][0]["layers"] == plain["stages"][0]["layers"]


def test_the_sweep_must_name_a_gpu_of_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "gemm.csv").write_text(_sweep(500.0))
    unnamed = clustersim.calibrate(gemm=tmp_path / "gemm.csv")
    for overlay, rule in ((unnamed, "is required with node_groups of several GPUs (a100-80gb, h100-80gb)"),
                          ({**unnamed, "gemm": {**unnamed["gemm"], "gpu": "b200-180gb"}},
                           "b200-180gb is not a GPU of this cluster (its catalog GPUs: a100-80gb, h100-80gb)")):
        with pytest.raises(clustersim.InvalidRequest) as err:
            clustersim.simulate(_with(overlay))
        assert err.value.details[0] == ("cluster.measured.gemm.gpu", pytest.approx(err.value.details[0][1]))
        assert rule in err.value.details[0][1]
    # on one GPU kind the sweep names it or nothing; another GPU is refused as well
    one = {**MIXED, "cluster": {"preset": "dgx-h100", "num_nodes": 2,
                                "measured": {**unnamed, "gemm": {**unnamed["gemm"], "gpu": "a100-80gb"}}}}
    with pytest.raises(clustersim.InvalidRequest) as err:
        clustersim.simulate(one)
    assert err.value.details[0][0] == "cluster.measured.gemm.gpu"
    request = tmp_path / "mixed.json"
    request.write_text(json.dumps(_with("measured.yaml")))
    assert main(["calibrate", "nccl-tests", "--gemm", str(tmp_path / "gemm.csv"), "--gemm-gpu", "h100-80gb",
                 "--out", str(tmp_path / "measured.yaml")]) == 0
    assert main(["simulate", str(request)]) == 0
    capsys.readouterr()
