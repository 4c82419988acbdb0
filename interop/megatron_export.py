"""A request's model and layout -> the Megatron-LM launch command (`torchrun ... pretrain_gpt.py FLAGS`).

Every flag emitted is one of Megatron-LM's own (interop/data/megatron_flags.txt; tests check each against it), and
`interop/megatron_import.py` reads the command back into the same model and layout. A layout Megatron-LM cannot
run is a RequestError naming the field and the framework that can: ZeRO 2 and 3 (DeepSpeed; FSDP in torchtitan),
GPipe and the zero-bubble schedules, an encoder-decoder model, a placement other than Megatron's tp-cp-dp-pp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api_schemas import RequestError, SimulationRequest
from interop.megatron_args import megatron_flags

__all__ = ["megatron_command"]

_RECIPES = {"tensorwise": "tensorwise", "mxfp8": "mxfp8", "blockwise": "blockwise"}
# layout.cp_comm -> Megatron-LM's --cp-comm-type (NVIDIA/Megatron-LM megatron/training/arguments.py: "p2p, a2a,
# allgather or a2a+p2p"; Transformer Engine's AttnFuncWithCPAndKVP2P, ...QKVOA2A, ...KVAllGather)
_CP_COMM_TYPES = {"p2p": "p2p", "a2a": "a2a", "all_gather": "allgather"}
_SCHEDULES_ELSEWHERE = {
    "gpipe": "torchtitan can (pipeline_parallel_schedule = \"GPipe\")",
    "zb_h1": "torchtitan can (pipeline_parallel_schedule = \"ZBVZeroBubble\" is zb_v; ZB-H1 is in the zero-bubble "
             "fork of Megatron-LM, sail-sg/zero-bubble-pipeline-parallelism)",
    "zb_h2": "the zero-bubble fork of Megatron-LM can (sail-sg/zero-bubble-pipeline-parallelism)",
    "zb_v": "torchtitan can (pipeline_parallel_schedule = \"ZBVZeroBubble\")",
    "dualpipe": "DeepSeek's DualPipe (deepseek-ai/DualPipe) can; torchtitan has DualPipeV",
}


def _refuse(field: str, rule: str) -> RequestError:
    return RequestError.for_field(field, f"{rule}; Megatron-LM cannot run it")


def _model_flags(m: Mapping[str, Any]) -> list[str]:
    if m.get("architecture", "decoder_only") != "decoder_only":
        raise _refuse("model.architecture", f"{m['architecture']} is trained by pretrain_t5.py/pretrain_bert.py "
                      "with other flags")
    heads, hidden = m["num_attention_heads"], m["hidden_size"]
    flags = [f"--num-layers {m['num_layers']}", f"--hidden-size {hidden}",
             f"--ffn-hidden-size {m.get('ffn_hidden_size') or 4 * hidden}", f"--num-attention-heads {heads}"]
    kv = m.get("num_kv_heads", heads)
    if kv != heads:
        flags += ["--group-query-attention", f"--num-query-groups {kv}"]
    if m.get("attention_variant") == "mla":
        flags += ["--multi-latent-attention", f"--kv-lora-rank {m['kv_lora_rank']}",
                  f"--qk-head-dim {m['head_dim']}", f"--qk-pos-emb-head-dim {m['qk_rope_head_dim']}",
                  f"--v-head-dim {m['v_head_dim']}"]
        if m.get("q_lora_rank"):
            flags.append(f"--q-lora-rank {m['q_lora_rank']}")
    else:
        flags.append(f"--kv-channels {m.get('head_dim') or hidden // heads}")
    seq = m["seq_length"]
    flags += [f"--seq-length {seq}", f"--max-position-embeddings {seq}", f"--vocab-size {m['vocab_size']}"]
    activation = m.get("activation") or ("swiglu" if m.get("gated_mlp") else "gelu")
    if activation == "swiglu":
        flags.append("--swiglu")
    elif activation == "squared_relu":
        flags.append("--squared-relu")
    elif activation != "gelu":
        raise _refuse("model.activation", f"{activation} has no Megatron-LM flag (--swiglu, --squared-relu or the "
                      "default gelu)")
    if not m.get("tied_embeddings", True):
        flags.append("--untie-embeddings-and-output-weights")
    if m.get("attention") is not None:
        flags.append(f"--attention-backend {'flash' if m['attention'] == 'flash' else 'unfused'}")
    if m.get("num_experts"):
        ffn = m["moe_ffn_hidden_size"]
        flags += [f"--num-experts {m['num_experts']}", f"--moe-router-topk {m['moe_top_k']}",
                  f"--moe-ffn-hidden-size {ffn}"]
        if m.get("num_shared_experts"):
            flags.append(f"--moe-shared-expert-intermediate-size {m['num_shared_experts'] * ffn}")
        dense = m.get("first_dense_layers") or 0
        if dense:
            flags.append(f"--moe-layer-freq ([0]*{dense}+[1]*{m['num_layers'] - dense})")
        if m.get("moe_capacity_factor") is not None:
            flags.append(f"--moe-expert-capacity-factor {m['moe_capacity_factor']}")
    if m.get("mtp_layers"):
        flags.append(f"--mtp-num-layers {m['mtp_layers']}")
    return flags


def _layout_flags(request: SimulationRequest) -> list[str]:
    lay = request.layout
    if lay.zero_stage > 1:
        raise _refuse("layout.zero_stage", f"ZeRO {lay.zero_stage} is not in Megatron-LM (its distributed optimizer "
                      "is ZeRO 1); DeepSpeed can (zero_optimization.stage), and torchtitan's FSDP is ZeRO 3")
    if lay.zero_implementation != "megatron":
        raise _refuse("layout.zero_implementation", f"{lay.zero_implementation} is another framework's ZeRO")
    if lay.schedule in _SCHEDULES_ELSEWHERE:
        raise _refuse("layout.schedule", f"Megatron-LM runs 1f1b and interleaved_1f1b only, not {lay.schedule}; "
                      f"{_SCHEDULES_ELSEWHERE[lay.schedule]}")
    if lay.placement not in ("tp,cp,dp,pp", "tp,dp,pp"):
        raise _refuse("layout.placement", f"{lay.placement!r} is not Megatron-LM's rank order tp-cp-dp-pp")
    if lay.stage_layers is not None or lay.pipeline_partition == "balanced":
        raise _refuse("layout.stage_layers", "uneven pipeline stages beyond the first and last are set by "
                      "--pipeline-model-parallel-layout, which this export does not write")
    flags = [f"--tensor-model-parallel-size {lay.tp}", f"--pipeline-model-parallel-size {lay.pp}",
             f"--context-parallel-size {lay.cp}"]
    if lay.cp > 1 and lay.cp_comm != "p2p":  # megatron/training/arguments.py --cp-comm-type: p2p (default), a2a, ...
        flags.append(f"--cp-comm-type {_CP_COMM_TYPES[lay.cp_comm]}")
    if request.model.num_experts or lay.ep > 1 or lay.expert_tp > 1:
        flags += [f"--expert-model-parallel-size {lay.ep}", f"--expert-tensor-parallel-size {lay.expert_tp}"]
    if lay.schedule == "interleaved_1f1b" and lay.virtual_stages > 1:
        flags.append(f"--num-virtual-stages-per-pipeline-rank {lay.virtual_stages}")
    if lay.sequence_parallel:
        flags.append("--sequence-parallel")
    flags += [f"--micro-batch-size {lay.microbatch_size}", f"--global-batch-size {lay.global_batch_size}"]
    if lay.recompute == "full":
        flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    elif lay.recompute == "selective":
        flags.append("--recompute-granularity selective")
    if lay.zero_stage == 1:
        flags.append("--use-distributed-optimizer")
        if lay.zero_shard_size and lay.zero_shard_size < lay.dp:  # Megatron-Core's partial distributed optimizer
            flags.append(f"--num-distributed-optimizer-instances {lay.dp // lay.zero_shard_size}")
    if lay.overlap_grad_reduce:
        flags.append("--overlap-grad-reduce")
    if lay.tp_comm_overlap:
        flags.append("--tp-comm-overlap")
    flags.append("--fp16" if lay.precision == "fp16" else "--bf16")
    reduce = lay.grad_reduce_dtype or ("fp16" if lay.precision == "fp16" else "fp32")
    if reduce == "bf16" and lay.precision != "fp16":
        flags.append("--grad-reduce-in-bf16")
    elif reduce == "fp32" and lay.precision == "fp16":
        flags.append("--accumulate-allreduce-grads-in-fp32")
    if lay.precision == "fp8":
        recipe = lay.fp8_recipe or "tensorwise"  # Megatron-Core's tensorwise is current scaling, delayed delayed
        flags += ["--fp8-format hybrid", "--fp8-recipe " + (
            "delayed" if recipe == "tensorwise" and lay.fp8_scaling != "current" else _RECIPES[recipe])]
    if lay.fp8_param_gather:
        flags.append("--fp8-param-gather")
    return flags


def megatron_command(request: SimulationRequest, model: Mapping[str, Any], *, num_gpus: int,
                     gpus_per_node: int) -> str:
    """The launch command for a request whose model fields (preset resolved) are `model`: one flag a line."""
    flags = _model_flags(model) + _layout_flags(request)
    known = megatron_flags()
    unknown = [f.split()[0] for f in flags if f.split()[0] not in known]
    if unknown:  # a bug here, not the user's: every name above is in the recorded list (tests say so)
        raise RuntimeError(f"emitted flags not in Megatron-LM's list: {unknown}")
    nodes, per_node = (num_gpus // gpus_per_node, gpus_per_node) if num_gpus % gpus_per_node == 0 else (1, num_gpus)
    lines = [f"torchrun --nproc_per_node {per_node} --nnodes {nodes} pretrain_gpt.py"] + [
        "    " + (f"{f.split(' ', 1)[0]} '{f.split(' ', 1)[1]}'" if "(" in f else f) for f in flags]
    return " \\\n".join(lines) + "\n"
