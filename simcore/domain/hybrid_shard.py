"""Hybrid sharded data parallelism (HSDP, `layout.zero_shard_size`): ZeRO 3 sharding each parameter, its gradient
and its optimizer states over a group of `zero_shard_size` consecutive data-parallel ranks instead of all of them,
the dp / zero_shard_size groups holding the same shards (replicas) averaging their gradients with an all-reduce.

As PyTorch runs it (`zero_implementation: fsdp`, zero_stage 3):
- FSDP1's ShardingStrategy.HYBRID_SHARD (torch/distributed/fsdp/_runtime_utils.py, PyTorch 2.2, what fms-fsdp's
  `sharding_strategy: hsdp` selects): the shard group is the node, the all-gathers and each unit's reduce-scatter
  run in it, then `_post_backward_hook`'s reduce of the unit's gradient all-reduces the reduce-scatter's output
  shard over the inter-node group (`_inter_node_pg`) on its own stream (`_all_reduce_stream`), which the end of
  backward waits for with the reduce-scatter stream (`_post_backward_final_callback`).
- FSDP2's fully_shard over a 2-D (replicate, shard) device mesh (torchtitan's data_parallel_replicate_degree x
  data_parallel_shard_degree): the same collectives, the all-reduce again on a stream of its own.
As Megatron-Core runs it (`zero_implementation: megatron`, zero_stage 1: its distributed optimizer with
`--num-distributed-optimizer-instances` = dp / zero_shard_size; megatron/core/distributed/param_and_grad_buffer.py
start_grad_sync): each gradient bucket is reduce-scattered within the instance (the intra-instance group) and its
shard then all-reduced across the instances (the inter-instance group), both on one communication stream; the
optimizer states are sharded within the instance and the updated parameters all-gathered within it. Megatron-Core
asserts the distributed optimizer and no expert parallelism.
The groups are consecutive data-parallel ranks (the mesh's shard dimension innermost; Megatron's intra-instance
groups likewise): with the default placement and tp = 1, a node's GPUs.

Rules: zero_stage 3 with zero_implementation fsdp, or zero_stage 1 with megatron (DeepSpeed's MiCS is not
modelled); zero_shard_size >= 1 divides dp; below dp it needs cp = 1 and no expert
parallelism (their sharding meshes, dp_shard x cp and the experts' own, are not modelled). zero_shard_size = dp is
full shard (over dp x cp with context parallelism).
"""

from __future__ import annotations

from typing import Protocol

from topology.errors import SpecError

__all__ = ["hybrid", "shard_ranks", "validate_hybrid_shard"]

FIELD = "layout.zero_shard_size"


class Layout(Protocol):
    """What these rules read of a layout (simcore/domain/layout.py's Layout, which imports this module)."""

    @property
    def dp(self) -> int: ...
    @property
    def dp_cp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def zero_stage(self) -> int: ...
    @property
    def zero_implementation(self) -> str: ...
    @property
    def zero_shard_size(self) -> int | None: ...


def hybrid(layout: Layout) -> bool:
    """Does the layout shard over fewer data-parallel ranks than it has (HSDP)? zero_shard_size = dp is full shard."""
    return layout.zero_shard_size is not None and layout.zero_shard_size < layout.dp


def shard_ranks(layout: Layout) -> int:
    """The ranks ZeRO shards over: HSDP's zero_shard_size, or every data-parallel (x context-parallel) rank."""
    return layout.zero_shard_size if hybrid(layout) and layout.zero_shard_size is not None else layout.dp_cp


def validate_hybrid_shard(layout: Layout) -> None:
    """Raise SpecError naming layout.zero_shard_size when the layout breaks one of the module docstring's rules."""
    size = layout.zero_shard_size
    if size is None:
        return
    if size < 1:
        raise SpecError(FIELD, "must be >= 1")
    fsdp = layout.zero_stage == 3 and layout.zero_implementation == "fsdp"
    megatron = layout.zero_stage == 1 and layout.zero_implementation == "megatron"
    if not (fsdp or megatron):
        raise SpecError(FIELD, f"applies to zero_stage 3 with zero_implementation fsdp (PyTorch FSDP's hybrid "
                        f"sharding) or zero_stage 1 with megatron (Megatron-Core's partial distributed optimizer); "
                        f"this layout has zero_stage {layout.zero_stage}, {layout.zero_implementation}")
    if layout.dp % size:
        raise SpecError(FIELD, f"must divide dp ({layout.dp}): the replicas are dp / zero_shard_size groups")
    if size < layout.dp and layout.cp > 1:
        raise SpecError(FIELD, "hybrid sharding with context parallelism (cp > 1) is not modelled")
    if size < layout.dp and layout.ep > 1:
        raise SpecError(FIELD, "hybrid sharding with expert parallelism (ep > 1) is not modelled")
