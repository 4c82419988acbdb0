"""Multi-token prediction (DeepSeek-V3 technical report §2.2; Megatron-Core's MultiTokenPredictionBlock,
megatron/core/transformer/multi_token_prediction.py): `model.mtp_layers` depths, all on the last pipeline stage
(Megatron-Core's placement without a custom pipeline layout: get_mtp_num_layers_to_build). Depth k embeds the
input shifted by k tokens (the model's embedding), normalises it and the previous depth's hidden states (two
RMSNorms), projects their concatenation from 2h to h (eh_proj, column-parallel), runs one transformer layer of the
model's last layer's type (simcore/cost/partition.layer_partition puts it on the last stage) and computes its own
logits and loss with the model's output layer (a final norm and the shared head).

What this module costs is the work beside the transformer layer, per microbatch on one tensor rank: the embedding,
the norms, the projection and the output head. Its tensor-parallel collectives are the embedding's and the
logits' (as on the first and last stages); the projection's own gather is left out (a column-parallel projection
of the h-wide output, one more all-gather of the hidden states a depth with sequence parallelism).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.tp_time import collective_s, tp_collectives_s, tp_ring_bytes
from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import (
    BYTES,
    NORM_BACKWARD_BYTES,
    Op,
    embedding_forward_ops,
    gemm_op,
    logits_forward_ops,
    memory_op,
)
from simcore.cost.compute.weight_gradients import weight_share
from simcore.cost.parameters import CostParameters
from simcore.domain.model import ModelShape
from topology.hardware import GpuSpec

__all__ = ["NO_MTP", "MtpCost", "mtp_cost", "mtp_forward_ops", "mtp_parameters"]


def mtp_forward_ops(model: ModelShape, b: int, t: int, sequence_parallel: bool) -> tuple[Op, ...]:
    """One depth's kernels beside its transformer layer, forward: embedding, two norms, projection, output head."""
    tokens = b * model.seq_length
    h = model.hidden_size
    norm_tokens = tokens / t if sequence_parallel else tokens
    return (*embedding_forward_ops(model, b, t),
            memory_op("mtp_norms", 2 * 2 * BYTES * norm_tokens * h, NORM_BACKWARD_BYTES),
            gemm_op("mtp_eh_proj", tokens, h / t, 2 * h),
            *logits_forward_ops(model, b, t, sequence_parallel))


def mtp_parameters(model: ModelShape, t: int) -> int:
    """Weights of one depth beside its transformer layer, per tensor rank: the 2h x h projection (split over the
    tensor ranks) and its three norms (Megatron-LM counts the same: num_floating_point_operations)."""
    h = model.hidden_size
    return 2 * h * h // t + 3 * h


@dataclass(frozen=True, slots=True)
class MtpCost:
    """All depths' work beside their transformer layers, per microbatch on one tensor rank."""

    forward_s: float = 0.0
    backward_s: float = 0.0
    backward_weight_s: float = 0.0  # of backward_s: the projection's and the head's weight gradients
    forward_tp_s: float = 0.0
    backward_tp_s: float = 0.0
    tp_bytes: float = 0.0  # bytes a tensor rank sends for them, forward
    parameters: int = 0


NO_MTP = MtpCost()


def mtp_cost(model: ModelShape, b: int, t: int, sequence_parallel: bool, gpu: GpuSpec, params: CostParameters,
             collectives: CollectiveModel | None, groups: Sequence[tuple[int, ...]]) -> MtpCost:
    """`model` is the one a rank runs (s/cp tokens a sample with context parallelism); `groups` its tensor-parallel
    groups (empty with free communication)."""
    depths = model.mtp_layers
    if not depths:
        return NO_MTP
    ops = mtp_forward_ops(model, b, t, sequence_parallel)
    backward = tuple(op.backward() for op in ops)
    backward_s = ops_time(backward, gpu, params)
    embedding_bwd = ops_time(tuple(op.backward() for op in embedding_forward_ops(model, b, t)), gpu, params)
    message = b * model.seq_length * model.hidden_size * BYTES
    emb_tp = logit_tp = 0.0
    if groups:  # the embedding ends with an all-reduce (a reduce-scatter with sequence parallelism), the logits
        # start with an all-gather of the hidden states with sequence parallelism (workload.py, stage by stage)
        emb_tp = collective_s(collectives, Collective.REDUCE_SCATTER, groups, message) if sequence_parallel else \
            tp_collectives_s(collectives, groups, message, False)
        logit_tp = collective_s(collectives, Collective.ALL_GATHER, groups, message) if sequence_parallel else 0.0
    return MtpCost(
        forward_s=depths * ops_time(ops, gpu, params), backward_s=depths * backward_s,
        # (the embedding's backward only accumulates its table's gradient: weight work, as on the first stage)
        backward_weight_s=depths * (weight_share(backward, gpu, params) * backward_s + embedding_bwd),
        forward_tp_s=depths * (emb_tp + logit_tp), backward_tp_s=depths * logit_tp,
        tp_bytes=depths * tp_ring_bytes(t, message), parameters=depths * mtp_parameters(model, t))
