"""The GPU catalog's Blackwell entries, the B200 and GB200 NVL72 presets, and NVLink domains across nodes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topology.cluster_spec import NODE_PRESETS, sized
from topology.errors import SpecError
from topology.graph import build_cluster
from topology.hardware import GB, GIB, GPUS, GpuKind, nearest_catalog_gpu
from topology.routing import Router


def test_blackwell_figures_are_the_reference_hardware_section() -> None:
    b200, gb200 = GPUS[GpuKind.B200_180GB], GPUS[GpuKind.GB200_186GB]
    assert (b200.peak_flops_per_s, b200.peak_fp8_flops_per_s, b200.tdp_w) == (2250e12, 4500e12, 1000.0)
    assert (b200.hbm_capacity_bytes, b200.hbm_bandwidth_bytes_per_s) == (180 * GIB, 7700 * GB)
    assert (gb200.peak_flops_per_s, gb200.peak_fp8_flops_per_s, gb200.tdp_w) == (2450e12, 4900e12, None)
    assert (gb200.hbm_capacity_bytes, gb200.hbm_bandwidth_bytes_per_s) == (186 * GIB, 8000 * GB)
    for gpu in (b200, gb200):
        assert gpu.nvlink_bandwidth_bytes_per_s == 900 * GB and gpu.generation == "blackwell"
    assert not GPUS[GpuKind.A100_80GB].has_fp8 and GPUS[GpuKind.H100_80GB].peak_fp8_flops_per_s == 1978.9e12


def test_presets() -> None:
    b = NODE_PRESETS["dgx-b200"]
    assert (b.gpu, b.gpus_per_node, b.nics_per_node, b.nic_bandwidth_bytes_per_s) == (
        GpuKind.B200_180GB, 8, 8, 400 * GB / 8)
    n = NODE_PRESETS["gb200-nvl72"]
    assert (n.gpu, n.gpus_per_node, n.nics_per_node, n.domain_gpus) == (GpuKind.GB200_186GB, 72, 72, 72)


def test_nearest_catalog_gpu_by_16bit_peak() -> None:
    assert nearest_catalog_gpu(989.4e12).kind is GpuKind.H100_80GB  # the first of H100 and H200
    assert nearest_catalog_gpu(2000e12).kind is GpuKind.B200_180GB
    assert nearest_catalog_gpu(300e12).generation == "ampere"


def test_a_domain_of_whole_nodes_routes_over_nvlink() -> None:
    spec = replace(sized(NODE_PRESETS["dgx-h100"], 32), gpus_per_node=4, nics_per_node=4, nvlink_domain_gpus=16)
    cluster = build_cluster(spec)
    router = Router(cluster)
    # GPUs 0 and 15 sit on different nodes of one domain: one switch between them, no NIC
    assert router.nodes(0, 15) == [("gpu", 0), ("nvswitch", 0), ("gpu", 15)]
    assert ("nic", 0) in router.nodes(0, 16)  # another domain: InfiniBand
    assert sum(1 for _, d in cluster.graph.nodes(data=True) if d["kind"] == "nvswitch") == 2


def test_default_domain_is_the_node_and_builds_the_same_graph() -> None:
    spec = sized(NODE_PRESETS["dgx-h100"], 16)
    a, b = build_cluster(spec), build_cluster(replace(spec, nvlink_domain_gpus=8))
    assert a.link_ends == b.link_ends and a.link_bandwidth_bytes_per_s == b.link_bandwidth_bytes_per_s


@pytest.mark.parametrize(("domain", "rule"), [(32, "must not exceed"), (12, "multiple of gpus_per_node"),
                                              (0, ">= 1")])
def test_domain_rules(domain: int, rule: str) -> None:
    with pytest.raises(SpecError) as err:
        replace(sized(NODE_PRESETS["dgx-h100"], 16), nvlink_domain_gpus=domain).validate()
    assert err.value.field == "cluster.nvlink_domain_gpus" and rule in err.value.rule
