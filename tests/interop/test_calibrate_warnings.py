"""A simulation on a measured cluster says in its warnings where it extrapolated from the measurements: message
sizes outside a table's rows, groups of another configuration than the table's, GEMM shapes outside the sweep's
box; none where the run stays inside what was measured. The warnings are each run's own, also on a network that
simulations share (a search's workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import clustersim
from api_schemas import SimulationRequest
from service import convert
from simcore import build_network, simulate
from simcore.cost.comm.nccl_tuning import Collective

DATA = Path(__file__).parent / "data" / "nccl-tests"
SIZES = [1024 * 2**i for i in range(25)]  # 1 KiB to 16 GiB


def _doc(cluster: dict[str, Any], **layout: Any) -> dict[str, Any]:
    # untied embeddings: no 2-rank all-reduce of the shared embedding between the first and last stages
    return {"model": {"preset": "gpt3-1.3b", "tied_embeddings": False}, "cluster": cluster,
            "layout": {"tp": 1, "pp": 1, "microbatch_size": 1, "overlap_grad_reduce": True, **layout}}


def _measured(doc: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "cluster": {**doc["cluster"], "measured": overlay}}


def _warnings(doc: dict[str, Any]) -> list[str]:
    return [w for w in clustersim.simulate(doc).model_dump()["warnings"] if w.startswith("measured")]


def _model_table(doc: dict[str, Any], group: tuple[int, ...], nodes: int) -> dict[str, Any]:
    """An all_reduce table at the model's own times for `group` over `nodes` hosts, 1 KiB to 16 GiB."""
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc))
    model = build_network(scenario.cluster, scenario.algorithm).collectives
    return {"collective": "all_reduce", "ranks": len(group), "nodes": nodes,
            "points": [{"size_bytes": s, "time_us": model.isolated_time(Collective.ALL_REDUCE, [group], s) * 1e6}
                       for s in SIZES]}


def test_sizes_and_groups_outside_a_real_table_are_named() -> None:
    overlay = clustersim.calibrate([DATA / "oci-a100-2x8-all_reduce.txt"])  # 16 ranks on 2 hosts, 10 GiB only
    doc = _doc({"preset": "dgx-a100-40gb", "num_nodes": 4}, dp=32, global_batch_size=64)
    warned = _warnings(_measured(doc, overlay))
    assert len(warned) == 1 and warned[0].startswith("measured all_reduce (16 ranks over 2 hosts) extrapolated")
    assert "outside its 10 GiB to 10 GiB (" in warned[0] and "below, down to" in warned[0]
    assert "groups of another configuration (32 ranks over 4 hosts in 4 NVLink domains)" in warned[0]
    assert _warnings(doc) == []  # no overlay, no such warning


def test_a_run_inside_the_table_is_not_warned_and_warnings_are_each_runs_own() -> None:
    cluster = {"preset": "dgx-h100", "num_nodes": 4}
    inside = _doc(cluster, dp=16, pp=2, global_batch_size=64, placement="tp,dp,pp")  # DP groups: 16 GPUs, 2 hosts
    overlay = {"collectives": [_model_table(inside, tuple(range(16)), 2)]}
    wider = _doc(cluster, dp=32, global_batch_size=64)  # a DP group of 32 GPUs over 4 hosts
    assert _warnings(_measured(inside, overlay)) == []
    assert any("32 ranks over 4 hosts" in w for w in _warnings(_measured(wider, overlay)))
    # one network for all three, as a search's worker keeps it: each run says what it itself extrapolated
    scenarios = [convert.to_scenario(SimulationRequest.model_validate(_measured(d, overlay)))
                 for d in (wider, inside, wider)]
    network = build_network(scenarios[0].cluster, scenarios[0].algorithm)
    runs = [[w for w in simulate(s, network).warnings if w.startswith("measured")] for s in scenarios]
    assert runs[0] and runs[1] == [] and runs[2] == runs[0]


def test_gemm_shapes_outside_the_sweep_are_named(tmp_path: Path) -> None:
    powers = [2**i for i in range(10, 17)]
    (tmp_path / "gemm.csv").write_text("m,n,k,dtype,tflops\n" + "\n".join(
        f"{m},{n},{k},bf16,600" for m in powers for n in powers for k in powers) + "\n")
    overlay = clustersim.calibrate(gemm=tmp_path / "gemm.csv")
    cluster = {"preset": "dgx-h100", "num_nodes": 1}
    tp8 = _doc(cluster, dp=1, tp=8, global_batch_size=8, microbatch_size=4)
    warned = _warnings(_measured(tp8, overlay))
    assert len(warned) == 1 and warned[0].startswith("measured GEMM sweep on h100-80gb extrapolated: ")
    assert "bf16 GEMM shapes of this layout (m x n x k) lie outside its rows' m 1024-65536" in warned[0]
    # the QKV projection's weight gradient on a tensor rank: 2048 x (3 x 2048 / 8) over the 8192 tokens
    assert "2048x768x8192" in warned[0] and "9 of the 16 bf16 GEMM shapes" in warned[0]
    fp8 = _doc(cluster, dp=8, global_batch_size=32, microbatch_size=4, precision="fp8")
    assert any("no fp8 rows" in w for w in _warnings(_measured(fp8, overlay)))


def test_a_transfer_table_says_it_scaled_sends_of_every_size() -> None:
    cluster = {"preset": "dgx-h100", "num_nodes": 2}
    doc = _doc(cluster, dp=1, tp=8, pp=2, global_batch_size=16, microbatch_size=8, sequence_parallel=True)
    table = {"collective": "sendrecv", "ranks": 16, "nodes": 2,
             "points": [{"size_bytes": s, "time_us": 10.0 + s / 2e4} for s in SIZES]}
    warned = _warnings(_measured(doc, {"collectives": [table]}))
    assert warned == ["measured sendrecv (16 ranks over 2 hosts) extrapolated: its bandwidth at 16 GiB scaled the "
                      "model's point-to-point sends of every size"]
