"""DeepSpeed's ZeRO++ (Wang et al. 2023, arXiv 2306.10209; deepspeedai/DeepSpeed pull request #3784, released in
v0.10.0): three options of DeepSpeed's ZeRO 3 (`zero_implementation: deepspeed`), named as in its
`zero_optimization` config (runtime/zero/config.py):
- `zero_quantized_weights` (qwZ): each parameter all-gather moves int8 with one fp32 scale a block, quantized from
  the rank's shard before the gather and dequantized to 16 bits after it (runtime/zero/partition_parameters.py
  CUDAQuantizer, blocks of at most 8,000 elements; simcore/cost/zeropp.py prices it);
- `zero_hpz_partition_size` (hpZ): after a forward gather each rank keeps a secondary shard of every parameter, 1/n
  of it, over a group of n consecutive ranks (`_create_zero_param_parallel_group`); the gathers that the backward
  hooks issue (`fetch_sub_module(forward=False)`) gather from those shards inside that group instead of across
  the whole data-parallel group. 1: off. The secondary shards are 16-bit (`_partition_param_sec`);
- `zero_quantized_gradients` (qgZ): each 2-D gradient of a reduce bucket is averaged by `all_to_all_quant_reduce`
  (runtime/comm/coalesced_collectives.py): int4 quantization, an all-to-all among the node's GPUs, a quantized
  reduction, an all-to-all among the GPUs of the same local rank on every node, dequantization and the average;
  1-D gradients (biases, norms) go through the reduce-scatter as before.

Rules, from DeepSpeed v0.10.0's source: they are options of ZeRO 3 (`zero_stage: 3`, zero_implementation
deepspeed; the 2021 DeepSpeed has none of them); the hpZ group size divides the data-parallel ranks
(`_create_zero_param_parallel_group` asserts the world divides by it) and, since its groups are consecutive global
ranks, needs the data-parallel ranks to be every rank (tp = cp = 1: DeepSpeed's pipeline engine already
excludes pp); qgZ's all-to-alls are built on the world's ranks and the node's GPU count
(`get_accelerator().device_count()`): it needs tp = cp = 1 too, and data-parallel ranks that fill whole nodes.
"""

from __future__ import annotations

from typing import Protocol

from topology.errors import SpecError

__all__ = ["uses_zeropp", "validate_zeropp", "validate_zeropp_nodes"]


class Layout(Protocol):
    """What these rules read of a layout (simcore/domain/layout.py's Layout, which imports this module)."""

    @property
    def dp(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def zero_stage(self) -> int: ...
    @property
    def zero_implementation(self) -> str: ...
    @property
    def zero_quantized_weights(self) -> bool: ...
    @property
    def zero_hpz_partition_size(self) -> int: ...
    @property
    def zero_quantized_gradients(self) -> bool: ...


def uses_zeropp(layout: Layout) -> bool:
    """Does the layout turn on any ZeRO++ option?"""
    return (layout.zero_quantized_weights or layout.zero_quantized_gradients
            or layout.zero_hpz_partition_size != 1)


def validate_zeropp(layout: Layout) -> None:
    """Raise SpecError naming the first ZeRO++ rule the layout breaks (the module docstring gives them)."""
    hpz = layout.zero_hpz_partition_size
    if hpz < 1:
        raise SpecError("layout.zero_hpz_partition_size", f"must be >= 1 (1: no secondary partition; given {hpz})")
    if not uses_zeropp(layout):
        return
    field = ("layout.zero_quantized_weights" if layout.zero_quantized_weights else
             "layout.zero_hpz_partition_size" if hpz != 1 else "layout.zero_quantized_gradients")
    if layout.zero_stage != 3 or layout.zero_implementation != "deepspeed":
        raise SpecError(field, "is a ZeRO++ option of DeepSpeed's ZeRO 3: it needs zero_stage 3 and "
                        f"zero_implementation deepspeed (given zero_stage {layout.zero_stage}, "
                        f"zero_implementation {layout.zero_implementation})")
    if hpz != 1:
        if layout.dp % hpz:
            raise SpecError("layout.zero_hpz_partition_size", f"must divide dp ({layout.dp}): DeepSpeed builds its "
                            f"secondary groups of {hpz} consecutive ranks over all of them")
        if layout.tp > 1 or layout.cp > 1:
            raise SpecError("layout.zero_hpz_partition_size", "needs tp = 1 and cp = 1: DeepSpeed's secondary "
                            "groups are consecutive global ranks, which are data-parallel ranks only then")
    if layout.zero_quantized_gradients and (layout.tp > 1 or layout.cp > 1):
        raise SpecError("layout.zero_quantized_gradients", "needs tp = 1 and cp = 1: DeepSpeed's quantized "
                        "gradient all-to-alls run over the world's ranks, which are data-parallel ranks only then")


def validate_zeropp_nodes(layout: Layout, gpus_per_node: int) -> None:
    """qgZ's all-to-alls take whole nodes (the module docstring): raise SpecError when the data-parallel ranks do
    not fill them."""
    if layout.zero_quantized_gradients and layout.dp % gpus_per_node:
        raise SpecError("layout.zero_quantized_gradients", f"needs dp ({layout.dp}) to be a multiple of the GPUs "
                        f"per node ({gpus_per_node}): its all-to-alls pair each node's GPUs with the same local "
                        "rank on every other node")
