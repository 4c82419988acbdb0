"""The Blackwell Ultra (B300, GB300) and L40S catalog entries and the DGX B300 and GB300 NVL72 presets, against the
vendors' figures their comments cite (topology/hardware.py, topology/cluster_spec.py)."""

from __future__ import annotations

from topology.cluster_spec import NODE_PRESETS
from topology.hardware import GB, GIB, GPUS, GpuKind


def test_b300_is_the_hgx_b300_datasheet_and_the_mlperf_system_description() -> None:
    b300 = GPUS[GpuKind.B300_288GB]
    assert (b300.peak_flops_per_s, b300.peak_fp8_flops_per_s, b300.peak_fp4_flops_per_s) == (
        36e15 / 8 / 2, 72e15 / 8 / 2, 105e15 / 8)  # 8 GPUs; BF16 and FP8 with sparsity, FP4 dense
    assert b300.hbm_capacity_bytes == 275040 * 2**20 and round(b300.hbm_capacity_bytes / GIB, 1) == 268.6
    assert (b300.nvlink_bandwidth_bytes_per_s, b300.tdp_w, b300.generation) == (14.4e12 / 8 / 2, 1100.0, "blackwell")
    assert b300.pcie_bandwidth_bytes_per_s == 64e9 * 16 / 8  # PCIe Gen6 x16, per direction


def test_gb300_is_the_gb300_nvl72_datasheet_per_gpu() -> None:
    gb300 = GPUS[GpuKind.GB300_288GB]
    assert (gb300.peak_flops_per_s, gb300.peak_fp8_flops_per_s, gb300.peak_fp4_flops_per_s) == (
        360e15 / 72 / 2, 720e15 / 72 / 2, 1080e15 / 72)
    assert gb300.hbm_bandwidth_bytes_per_s == 576e12 / 72 and gb300.hbm_capacity_bytes == 284208 * 2**20
    assert gb300.nvlink_bandwidth_bytes_per_s == 900 * GB  # 130 TB/s over 72 GPUs: 1.8 TB/s both ways
    assert gb300.tdp_w == 1400.0 and gb300.has_fp4 and gb300.has_nvlink


def test_l40s_is_a_pcie_card_without_nvlink_or_fp4() -> None:
    l40s = GPUS[GpuKind.L40S_48GB]
    assert (l40s.peak_flops_per_s, l40s.peak_fp8_flops_per_s) == (362.05e12, 733e12)
    assert (l40s.hbm_capacity_bytes, l40s.hbm_bandwidth_bytes_per_s) == (48 * GIB, 864 * GB)
    assert l40s.pcie_bandwidth_bytes_per_s == 32 * GB and l40s.tdp_w == 350.0 and l40s.sm_count == 142
    assert not l40s.has_nvlink and not l40s.has_fp4 and l40s.has_fp8 and l40s.generation == "ada"


def test_fp4_peaks_only_on_blackwell() -> None:
    assert {str(k) for k, g in GPUS.items() if g.has_fp4} == {"b200-180gb", "gb200-186gb", "b300-288gb",
                                                             "gb300-288gb"}
    assert GPUS[GpuKind.B200_180GB].peak_fp4_flops_per_s == 9000e12  # the modern reference's nvfp4_dense_tflops
    assert GPUS[GpuKind.GB200_186GB].peak_fp4_flops_per_s == 9800e12


def test_blackwell_ultra_presets_have_one_800_gbit_connectx8_per_gpu() -> None:
    dgx, nvl = NODE_PRESETS["dgx-b300"], NODE_PRESETS["gb300-nvl72"]
    assert (dgx.gpu, dgx.gpus_per_node, dgx.nics_per_node, dgx.domain_gpus) == (GpuKind.B300_288GB, 8, 8, 8)
    assert (nvl.gpu, nvl.gpus_per_node, nvl.nics_per_node, nvl.domain_gpus) == (GpuKind.GB300_288GB, 72, 72, 72)
    for spec in (dgx, nvl):
        assert spec.nic_bandwidth_bytes_per_s == 800e9 / 8
        assert spec.nvlink_bandwidth_bytes_per_s == 900 * GB
        # the GPU-to-NIC path carries the NIC's rate
        assert spec.hardware.pcie_bandwidth_bytes_per_s > spec.nic_bandwidth_bytes_per_s
