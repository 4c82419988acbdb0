"""NVLS collectives as NCCL's chunked kernel pipeline (simcore/cost/comm/nccl_kernels.py): the chunk sizes of
calcCollChunking, the closed form of the pipeline, and `auto` against every point of collectives.json's H100
all-reduce curve."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.nccl_kernels import NVLS_LAUNCH_S, NVLS_SYNC_S, chunk_bytes, nvls_latency_s, stages
from simcore.cost.comm.nccl_tuning import Communicator, NcclAlgorithm
from simcore.domain.layout import CollectiveAlgorithm
from topology import NODE_PRESETS, Router, build_cluster, sized

REFERENCE = Path(__file__).parents[4] / "simcore" / "calibration" / "reference" / "collectives.json"
AR = Collective.ALL_REDUCE
KIB, MIB, GIB = 2**10, 2**20, 2**30
H100_NODE = Communicator(ranks=8, nodes=1, generation="hopper", channels=16, nvls=True)


def curve() -> list[dict[str, Any]]:
    rows = {row["id"]: row for row in json.loads(REFERENCE.read_text())}
    points: list[dict[str, Any]] = rows["nccl-h100-8gpu-intranode-allreduce-curve"]["measured"]["curve"]
    return points


def dgx_h100() -> tuple[CollectiveModel, list[list[int]]]:
    cluster = build_cluster(NODE_PRESETS["dgx-h100"])
    return CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO), [list(range(8))]


def test_chunks_shrink_with_the_buffer_as_calc_coll_chunking_does() -> None:
    # 16 channels x 8 heads = 128 concurrent chunks of 128 KiB: 16 MiB per round
    assert chunk_bytes(NcclAlgorithm.NVLS, H100_NODE, 4 * GIB) == 128 * KIB
    assert chunk_bytes(NcclAlgorithm.NVLS, H100_NODE, GIB - 1) == 64 * KIB  # below 64 rounds
    assert chunk_bytes(NcclAlgorithm.NVLS, H100_NODE, 64 * MIB - 1) == 32 * KIB  # below 8 rounds of 64 KiB
    assert chunk_bytes(NcclAlgorithm.NVLS, H100_NODE, 8 * MIB - 1) == 16 * KIB  # below 2 rounds of 32 KiB
    assert chunk_bytes(NcclAlgorithm.NVLS, H100_NODE, 8) == 16 * KIB
    four_nodes = Communicator(ranks=32, nodes=4, generation="hopper", channels=16, nvls=True)
    assert chunk_bytes(NcclAlgorithm.NVLS_TREE, four_nodes, 64 * GIB) == 64 * KIB  # nvlsTreeMaxChunkSize


def test_the_pipeline_in_closed_form() -> None:
    # 48 MiB on 8 H100s: chunks of 32 KiB, 128 at a time = 4 MiB per iteration, 12 iterations; all-reduce's
    # three stages fill for two iterations.
    rate = 300e9
    expected = NVLS_LAUNCH_S + (12 + 2) * NVLS_SYNC_S + 2 * (4 * MIB) / rate
    assert stages(AR, NcclAlgorithm.NVLS) == 3
    assert nvls_latency_s(AR, NcclAlgorithm.NVLS, H100_NODE, 48 * MIB, rate) == pytest.approx(expected, rel=1e-12)
    # reduce-scatter and all-gather run two stages: one iteration of fill
    assert stages(Collective.REDUCE_SCATTER, NcclAlgorithm.NVLS) == 2
    assert stages(Collective.ALL_GATHER, NcclAlgorithm.NVLS) == 2


def test_auto_matches_the_measured_h100_curve_from_2_mib_within_3_5_percent() -> None:
    model, group = dgx_h100()
    checked = 0
    for point in curve():
        if point["bytes"] < 2 * MIB:
            continue
        choice = model.choice(AR, group, point["bytes"])
        assert choice is not None and choice.label == "nvls/Simple", point
        simulated = model.isolated_time(AR, group, point["bytes"])
        assert simulated == pytest.approx(point["time_us"] * 1e-6, rel=0.035), point
        checked += 1
    assert checked == 14  # 2 MiB to 16 GiB


def test_nccls_flat_estimate_was_what_missed_the_middle_sizes() -> None:
    # What NCCL chooses by (latency + S / bandwidth) is 20-30% fast at 4-16 MiB; the pipeline is within 3.5%.
    model, group = dgx_h100()
    points = {point["bytes"]: point["time_us"] * 1e-6 for point in curve()}
    for size in (4 * MIB, 8 * MIB, 16 * MIB):
        choice = model.choice(AR, group, size)
        assert choice is not None
        assert choice.time_s < 0.8 * points[size]
        assert model.isolated_time(AR, group, size) == pytest.approx(points[size], rel=0.035)


def test_small_messages_stay_within_21_percent_but_for_two_spikes_of_the_sample_run() -> None:
    # Below 2 MiB NCCL runs a ring with LL at NCCL's own latency (15 us); the sample run has two points far above
    # both neighbours (32 B: 68 us, 4 KiB: 23.6 us), noise rather than a mechanism, left out here.
    model, group = dgx_h100()
    points = curve()
    for i, point in enumerate(points):
        if point["bytes"] >= 2 * MIB:
            break
        seen = point["time_us"] * 1e-6
        if 0 < i < len(points) - 1 and seen > 1.3 * max(points[i - 1]["time_us"], points[i + 1]["time_us"]) * 1e-6:
            assert point["bytes"] in (32, 4096)
            continue
        simulated = model.isolated_time(AR, group, point["bytes"])
        assert math.isclose(simulated, seen, rel_tol=0.21), point


def test_the_nvls_tree_runs_as_the_pipeline_plus_the_trees_network_latency() -> None:
    # Two DGX H100s: the NVLS tree runs as the pipeline on the links (no protocol factor), its latency at least
    # the tree's network hops (2 x 20.9 us, tuning.cc).
    cluster = build_cluster(sized(NODE_PRESETS["dgx-h100"], 16))
    model = CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO)
    group = [list(range(16))]
    for size in (16 * MIB, 256 * MIB, 4 * GIB):
        choice = model.choice(AR, group, size)
        assert choice is not None and choice.algorithm is NcclAlgorithm.NVLS_TREE
        assert choice.bandwidth_factor == 1.0 and choice.latency_s > 2 * 20.9e-6


def test_the_docs_quote_the_fitted_constants() -> None:
    docs = (Path(__file__).parents[4] / "docs" / "model.md").read_text(encoding="utf-8")
    assert f"Launch ({NVLS_LAUNCH_S * 1e6:.2f} us) and synchronisation ({NVLS_SYNC_S * 1e6:.2f} us)" in docs
