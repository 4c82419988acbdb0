"""How each framework runs sharded data parallelism (ZeRO 3): its gather units, prefetching, synchronisations and
gradient reductions, with the defaults read from the frameworks' sources (the `framework_defaults` of
`training-runs-modern.json` record them, with the commits).

- megatron: one all-gather per transformer layer (or per `zero3_gather_bucket_elements`), the next layer's
  prefetched while the current one computes; one reduce-scatter per layer (simcore/engine/dp_sync.py).
- fsdp (PyTorch FSDP1 full shard / FSDP2 fully_shard, one unit per transformer layer): one all-gather of the
  unit's flat parameter (all_gather_into_tensor). Forward: implicit prefetch (the host runs ahead and issues
  the next unit's all-gather on the unshard stream) held back by `limit_all_gathers`: `_FreeEventQueue` with
  `_max_num_inflight_all_gathers = 2` (torch/distributed/fsdp/_limiter_utils.py): a unit's all-gather may
  start once the compute of the unit three before it has freed its parameters, two units ahead. Backward:
  BackwardPrefetch.BACKWARD_PRE with backward_prefetch_limit 1: the previous unit's all-gather is issued before
  the current unit's gradient computation, one unit ahead. Activation checkpointing wraps the layer inside the
  unit, so recomputation runs on the unit's gathered parameters: no second gather. Gradients: one
  reduce-scatter of the unit's flat gradient after its backward.
- deepspeed (DeepSpeed since PR #1453, January 2022, partitioned_param_coordinator.py): one coalesced
  all-gather per sub-module (each Linear), on its own stream; the compute stream waits for that event only;
  prefetch of the next stage3_prefetch_bucket_size (5e7) elements in trace order; parameters under
  stage3_param_persistence_threshold (1e5) elements stay gathered; the recomputed forward fires the
  sub-modules' hooks again and re-gathers; a parameter is kept if it is used again within
  stage3_max_reuse_distance (1e9) elements; gradients reduce-scattered coalesced in buckets of
  reduce_bucket_size (5e8) elements.
- deepspeed_2021 (DeepSpeed v0.3-v0.4; tag v0.4.0, commit 2d302d6a, stage3.py and partition_parameters.py): one
  all-gather per parameter (`_allgather_param`), each preceded by a device-wide torch.cuda.synchronize(); after a
  sub-module's fetch `_synchronize_communication` waits for the handles, the comm stream and the device; the
  all-gather is list-based (`torch.distributed.all_gather` into one tensor per rank: ProcessGroupNCCL copies the
  result out with one copy kernel per rank, and DeepSpeed builds the list with one `narrow` per rank): host work
  per rank; a prefetch (5e7 elements) only when nothing is in flight; parameters under 1e5 elements resident;
  the same reuse rule as above; gradients reduce-scattered one parameter at a time
  (`_reduce_scatter_gradients`, list-based again: the flatten copies one tensor per rank), each bucket's
  reductions issued when the next parameter's gradient overflows the 5e8-element bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.domain.layout import ZeroImplementation


@dataclass(frozen=True, slots=True)
class ShardingPolicy:
    """What an implementation does (sizes in elements)."""

    per_submodule: bool  # gather units are sub-modules (each Linear) rather than whole transformer layers
    per_parameter: bool  # one collective per parameter instead of one coalesced collective per unit
    forward_depth: int  # forward: how many units ahead of the one computing a gather may run
    backward_depth: int  # backward: the same
    prefetch_elements: int  # DeepSpeed's prefetch bucket (0: whole units, `*_depth` of them)
    persistence_threshold: int  # parameters with fewer elements stay gathered (never re-sharded)
    reuse_distance_elements: int  # a parameter used again within this many elements of trace stays gathered
    regather_on_recompute: bool  # the recomputed forward gathers the parameters again
    device_sync: bool  # torch.cuda.synchronize() before each gather and after each fetch: the device drains
    prefetch_when_idle: bool  # a prefetch is issued only when no gather is in flight
    list_collectives: bool  # one tensor per rank: the host issues per-rank ops, the GPU one copy per rank
    host_ops_per_rank: int  # host ops per rank of a list collective (a narrow view, a copy)
    reduce_bucket_elements: int  # gradients reduce when a bucket this large overflows (0: per unit)


POLICIES: dict[ZeroImplementation, ShardingPolicy] = {
    ZeroImplementation.FSDP: ShardingPolicy(
        per_submodule=False, per_parameter=False, forward_depth=2, backward_depth=1, prefetch_elements=0,
        persistence_threshold=0, reuse_distance_elements=0, regather_on_recompute=False, device_sync=False,
        prefetch_when_idle=False, list_collectives=False, host_ops_per_rank=0, reduce_bucket_elements=0),
    ZeroImplementation.DEEPSPEED: ShardingPolicy(
        per_submodule=True, per_parameter=False, forward_depth=2, backward_depth=2, prefetch_elements=50_000_000,
        persistence_threshold=100_000, reuse_distance_elements=1_000_000_000, regather_on_recompute=True,
        device_sync=False, prefetch_when_idle=False, list_collectives=False, host_ops_per_rank=0,
        reduce_bucket_elements=500_000_000),
    ZeroImplementation.DEEPSPEED_2021: ShardingPolicy(
        per_submodule=True, per_parameter=True, forward_depth=1, backward_depth=1, prefetch_elements=50_000_000,
        persistence_threshold=100_000, reuse_distance_elements=1_000_000_000, regather_on_recompute=True,
        device_sync=True, prefetch_when_idle=True, list_collectives=True, host_ops_per_rank=2,
        reduce_bucket_elements=500_000_000),
}


def policy(implementation: ZeroImplementation) -> ShardingPolicy | None:
    """The implementation's policy; None for megatron (simcore/engine/dp_sync.py's own ZeRO 3)."""
    return POLICIES.get(implementation)
