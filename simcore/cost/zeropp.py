"""What DeepSpeed's ZeRO++ options (simcore/domain/zeropp.py) cost: the bytes its collectives move and the time of
its quantization kernels, read from DeepSpeed v0.10.0 (deepspeedai/DeepSpeed, tag v0.10.0, the release that added
ZeRO++; csrc/quantization and the Python named below). The engine (simcore/engine/data_parallel/sharded.py) runs
the collectives; this module prices them.

- qwZ, a gather of E elements: `CUDAQuantizer.quantize` (runtime/zero/partition_parameters.py) turns each rank's
  shard into int8 with one fp32 scale per group of at most `target_group_size` = 8,000 elements; the fetch moves
  E bytes in one all-gather and the scales (4 bytes per 8,000 elements) in a second one on the same group right
  after it (`quant_handle`), whose latency counts as much as its bytes do not. Kernels: the shard's quantization
  (reads 2 bytes and writes 1 an element of the shard, E/n elements) and, when the handle is waited on, the
  dequantization of the whole parameter into the 16-bit buffer (reads 1 byte, writes 2 an element of E); both
  memory-bound.
- hpZ: the backward's gathers move the same bytes per element (qwZ's int8 or 16-bit) within the secondary group;
  making the secondary shard copies E/n elements of the gathered parameter (2 bytes read, 2 written), after the
  forward.
- qgZ, a 2-D gradient of E elements on nodes of `local` GPUs (runtime/comm/coalesced_collectives.py
  all_to_all_quant_reduce and csrc/quantization's swizzled_quantize, quant_reduce, dequantize): swizzle_quant
  reads the 16-bit gradient and writes int4 (2 + 0.5 bytes an element); the intra-node all-to-all moves its E/2
  bytes (and the scales); quantized_reduction reads them and writes E/local elements of int4 (0.5 + 0.5/local);
  the inter-node all-to-all moves those E/(2 local) bytes among the node's peers; dequantize reads them and writes
  16 bits (0.5/local + 2/local); the average reads the nodes' chunks and writes the rank's part (2/local + 2/(n)).
  Scales: one fp32 per quantization group (`intra_quant_group` = max(rows, columns, world) groups), counted in the
  all-to-alls' bytes. Each kernel is at least one launch (KERNEL_OVERHEAD_S).
All kernel times are memory-bound at the GPU's HBM bandwidth times `memory_efficiency`, as every other
memory-bound kernel (simcore/cost/compute/kernel_time.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.cost.parameters import KERNEL_OVERHEAD_S, CostParameters
from simcore.domain.layout import Layout
from simcore.domain.zeropp import uses_zeropp
from topology.hardware import GpuSpec

QWZ_GROUP_ELEMENTS = 8_000  # CUDAQuantizer.target_group_size (partition_parameters.py)
SCALE_BYTES = 4  # fp32 scales
INT8, INT4, HALF = 1.0, 0.5, 2.0  # bytes an element


@dataclass(frozen=True, slots=True)
class ZeroppCosts:
    """A layout's ZeRO++ options on one GPU kind: bytes on the wire and kernel seconds (the module docstring)."""

    quantized_weights: bool
    hpz: int  # the secondary group's ranks (1: no hpZ)
    quantized_gradients: bool
    dp: int
    local: int  # GPUs a node: qgZ's intra-node all-to-all group
    bandwidth: float  # bytes/s a memory-bound kernel moves

    def gather_bytes(self, elements: float, element_bytes: float) -> tuple[float, float]:
        """Bytes of the all-gathers of one parameter fetch of `elements` (`element_bytes` each without qwZ): the
        parameters', and with qwZ the scales' that follows it on the same group (0 without)."""
        if not self.quantized_weights:
            return elements * element_bytes, 0.0
        return elements * INT8, SCALE_BYTES * math.ceil(elements / QWZ_GROUP_ELEMENTS)

    def after_gather_s(self, elements: float, ranks: int) -> float:
        """Kernel seconds around one gather of `elements` over `ranks` ranks: with qwZ the shard's quantization
        and the parameter's dequantization; 0 without."""
        if not self.quantized_weights:
            return 0.0
        shard = elements / max(ranks, 1)
        return self._kernel(shard * (HALF + INT8)) + self._kernel(elements * (INT8 + HALF))

    def secondary_copy_s(self, elements: float) -> float:
        """hpZ: seconds to copy the secondary shard out of a gathered parameter of `elements`."""
        return self._kernel(elements / self.hpz * 2 * HALF) if self.hpz > 1 else 0.0

    def qgz_bytes(self, elements: float) -> tuple[float, float]:
        """qgZ on one 2-D gradient: the buffer bytes of the intra-node all-to-all and of the inter-node one (each
        rank's int4 data and its scales)."""
        groups = max(self.dp, 1)  # at least `world` quantization groups (intra_quant_group)
        intra = elements * INT4 + SCALE_BYTES * groups
        inter = elements / self.local * INT4 + SCALE_BYTES * groups / self.local
        return intra, inter

    def qgz_kernels_s(self, elements: float) -> float:
        """qgZ's kernels on one 2-D gradient of `elements`: quantize, quantized reduction, dequantize, average."""
        e, n = elements, self.local
        return (self._kernel(e * (HALF + INT4)) + self._kernel(e * INT4 + e / n * INT4)
                + self._kernel(e / n * (INT4 + HALF)) + self._kernel(e / n * HALF + e / self.dp * HALF))

    def _kernel(self, nbytes: float) -> float:
        return max(KERNEL_OVERHEAD_S, nbytes / self.bandwidth)


def secondary_shard_bytes(layout: Layout, parameters: float) -> float:
    """hpZ's memory: each rank keeps a 16-bit secondary shard of every parameter over its group (`_partition_param_sec`
    allocates 1/n of the parameter in its dtype); 0 without hpZ."""
    hpz = layout.zero_hpz_partition_size
    return HALF * parameters / hpz if hpz > 1 and layout.zero_stage >= 3 else 0.0


def zeropp_costs(layout: Layout, gpu: GpuSpec, params: CostParameters, gpus_per_node: int) -> ZeroppCosts | None:
    """The layout's ZeRO++ costs, or None when it turns none of its options on."""
    if not uses_zeropp(layout):
        return None
    return ZeroppCosts(layout.zero_quantized_weights, layout.zero_hpz_partition_size,
                       layout.zero_quantized_gradients, layout.dp, min(gpus_per_node, layout.dp),
                       gpu.hbm_bandwidth_bytes_per_s * params.memory_efficiency)
