"""A request's model and layout -> a Megatron-DeepSpeed launch: the `ds_config.json` DeepSpeed reads and the
`deepspeed --num_nodes N --num_gpus G pretrain_gpt.py FLAGS` command, written as one shell script (a heredoc
writes the config, then the command starts the run).

The config's keys are DeepSpeed's own (interop/data/deepspeed_keys.txt, DeepSpeed 38327e07) and the command's
flags Megatron-DeepSpeed's and DeepSpeed's launcher's (interop/data/megatron_deepspeed_flags.txt: Megatron-DeepSpeed
f4157bea's megatron/arguments.py, DeepSpeed's add_config_arguments and launcher); tests check every emitted name.
The batch follows DeepSpeed's rule (runtime/config.py _batch_assertion): train_batch_size =
train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel ranks. `interop/deepspeed.py` reads
the script back.

What Megatron-DeepSpeed runs, from its source: with --deepspeed and pp > 1 the model is a DeepSpeed PipelineModule
trained by DeepSpeed's PipelineEngine (megatron/training.py train_step), whose schedule is 1F1B (TrainSchedule) or
ZB-H1 (--enable-zbh1-pipeline; --enable-zbh1-exact-semantics splits every backward, the paper's schedule; not with
--sequence-parallel), with no virtual stages, ZeRO 0 or 1 only (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and
ZeRO-3 are incompatible with pipeline parallelism"), the ranks ordered tensor, data, pipe
(PipeModelDataParallelTopology) and layers cut by count (partition_method type:transformer). With pp = 1 the export
writes --no-pipeline-parallel (DeepSpeed's plain engine, which runs ZeRO 0 to 3). Its sequence parallelism beyond
Megatron's is DeepSpeed-Ulysses (--ds-sequence-parallel-size, an all-to-all of heads), not context parallelism;
--deepspeed turns async_tensor_model_parallel_allreduce off (megatron/arguments.py validate_args). DeepSpeed
overlaps the gradient reduction with backward under ZeRO only (zero_optimization.overlap_comm; at stage 0 it
all-reduces after backward, engine.py allreduce_gradients). ZeRO++ (simcore/domain/zeropp.py) is written as
zero_optimization's zero_quantized_weights, zero_hpz_partition_size and zero_quantized_gradients, the layout's fields
of those names, where the layout turns them on; they are options of DeepSpeed's stage 3 optimizer alone (engine.py
_configure_zero_optimizer), so a layout setting one at another stage or implementation is refused rather than
written for DeepSpeed to ignore. Anything else is a RequestError naming the field and who can run it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from api_schemas import RequestError, SimulationRequest
from interop.deepspeed import deepspeed_keys, megatron_deepspeed_flags

__all__ = ["CONFIG_NAME", "deepspeed_config", "deepspeed_launch"]

CONFIG_NAME = "ds_config.json"
_SCHEDULE_FLAGS = {"1f1b": [], "zb_h1": ["--enable-zbh1-pipeline", "--enable-zbh1-exact-semantics"]}
_SCHEDULES_ELSEWHERE = {
    "gpipe": "torchtitan can (pipeline_parallel_schedule = \"GPipe\")",
    "interleaved_1f1b": "Megatron-LM can (--num-virtual-stages-per-pipeline-rank)",
    "zb_h2": "the zero-bubble fork of Megatron-LM can (sail-sg/zero-bubble-pipeline-parallelism)",
    "zb_v": "torchtitan can (pipeline_parallel_schedule = \"ZBVZeroBubble\")",
    "dualpipe": "DeepSeek's DualPipe (deepseek-ai/DualPipe) can; torchtitan has DualPipeV",
}

# ZeRO++'s zero_optimization keys, the layout fields of the same names, with DeepSpeed's defaults (off)
_ZEROPP: dict[str, bool | int] = {"zero_quantized_weights": False, "zero_hpz_partition_size": 1,
                                  "zero_quantized_gradients": False}


def _refuse(field: str, rule: str) -> RequestError:
    return RequestError.for_field(field, f"{rule}; Megatron-DeepSpeed cannot run it")


def _model_flags(m: Mapping[str, Any]) -> list[str]:
    if m.get("architecture", "decoder_only") != "decoder_only":
        raise _refuse("model.architecture", f"{m['architecture']}: this export writes pretrain_gpt.py (decoder-only "
                      "models) under DeepSpeed's pipeline engine")
    if m.get("num_experts"):
        raise _refuse("model.num_experts", "DeepSpeed-MoE's layers (--num-experts, every --expert-interval layers) "
                      "are not the model's experts; Megatron-LM can (--num-experts, --expert-model-parallel-size)")
    if m.get("attention_variant") == "mla":
        raise _refuse("model.attention_variant", "multi-head latent attention is not in Megatron-DeepSpeed; "
                      "Megatron-LM can (--multi-latent-attention)")
    if m.get("mtp_layers"):
        raise _refuse("model.mtp_layers", "multi-token prediction is not in Megatron-DeepSpeed; Megatron-LM can "
                      "(--mtp-num-layers)")
    heads, hidden = m["num_attention_heads"], m["hidden_size"]
    flags = [f"--num-layers {m['num_layers']}", f"--hidden-size {hidden}",
             f"--ffn-hidden-size {m.get('ffn_hidden_size') or 4 * hidden}", f"--num-attention-heads {heads}"]
    if m.get("num_kv_heads", heads) != heads:
        flags.append(f"--num-key-value-heads {m['num_kv_heads']}")
    flags.append(f"--kv-channels {m.get('head_dim') or hidden // heads}")
    seq = m["seq_length"]
    flags += [f"--seq-length {seq}", f"--max-position-embeddings {seq}", f"--vocab-size {m['vocab_size']}"]
    activation = m.get("activation") or ("swiglu" if m.get("gated_mlp") else "gelu")
    if activation == "swiglu":
        flags.append("--swiglu")
    elif activation != "gelu":
        raise _refuse("model.activation", f"{activation} has no Megatron-DeepSpeed flag (--swiglu or the default "
                      "gelu); Megatron-LM can (--squared-relu)" if activation == "squared_relu" else
                      f"{activation} has no Megatron-DeepSpeed flag (--swiglu or the default gelu)")
    if not m.get("tied_embeddings", True):
        flags.append("--untie-embeddings-and-output-weights")
    if m.get("attention") == "flash":
        flags.append("--use-flash-attn-v2")
    return flags


def _check_layout(request: SimulationRequest, num_layers: int) -> None:
    lay = request.layout
    if lay.zero_implementation == "fsdp":
        raise _refuse("layout.zero_implementation", "fsdp is PyTorch FSDP; torchtitan can "
                      "(data_parallel_shard_degree)")
    if lay.zero_stage == 3 and lay.zero_implementation == "megatron":
        raise _refuse("layout.zero_implementation", "megatron's ZeRO 3 gathers a whole layer at a time (Megatron-"
                      "Core's FSDP; Megatron-LM can: --use-megatron-fsdp --data-parallel-sharding-strategy "
                      "optim_grads_params); DeepSpeed's ZeRO 3 is zero_implementation deepspeed")
    if lay.pp > 1 and lay.zero_stage > 1:
        raise _refuse("layout.zero_stage", f"ZeRO {lay.zero_stage} with pp {lay.pp}: DeepSpeed's pipeline engine "
                      "runs ZeRO 0 and 1 only (deepspeed/runtime/pipe/engine.py); torchtitan runs FSDP (ZeRO 3) "
                      "with pipeline parallelism")
    if lay.schedule not in _SCHEDULE_FLAGS and not (lay.pp == 1 and lay.schedule == "gpipe"):
        rule = ("interleaved stages (virtual_stages) are not in DeepSpeed's pipeline engine, and Megatron-"
                "DeepSpeed's own interleaved schedule runs only without --deepspeed" if lay.schedule ==
                "interleaved_1f1b" else f"DeepSpeed's pipeline engine runs 1f1b and zb_h1, not {lay.schedule}")
        raise _refuse("layout.schedule", f"{rule}; {_SCHEDULES_ELSEWHERE[lay.schedule]}")
    if lay.schedule == "zb_h1" and lay.sequence_parallel and lay.tp > 1:
        raise _refuse("layout.sequence_parallel", "Megatron-DeepSpeed's ZB-H1 refuses --sequence-parallel "
                      "(megatron/arguments.py); torchtitan can (ZBVZeroBubble is zb_v)")
    if lay.optimizer_post_validation:
        raise _refuse("layout.optimizer_post_validation", "Megatron-DeepSpeed's ZB-H1 has no post-validation; the "
                      "zero-bubble fork of Megatron-LM can (sail-sg/zero-bubble-pipeline-parallelism)")
    if lay.cp > 1:
        raise _refuse("layout.cp", "Megatron-DeepSpeed's sequence parallelism is DeepSpeed-Ulysses "
                      "(--ds-sequence-parallel-size: an all-to-all of heads), not context parallelism; Megatron-LM "
                      "can (--context-parallel-size), torchtitan can (context_parallel_degree)")
    if lay.ep > 1 or lay.expert_tp > 1:
        raise _refuse("layout.ep", "DeepSpeed-MoE's expert parallelism is not the model's; Megatron-LM can "
                      "(--expert-model-parallel-size)")
    if lay.placement not in ("tp,cp,dp,pp", "tp,dp,pp"):
        raise _refuse("layout.placement", f"{lay.placement!r} is not DeepSpeed's rank order (tensor innermost, "
                      "then data, then pipe: PipeModelDataParallelTopology)")
    if lay.stage_layers is not None or lay.pipeline_partition == "balanced" or num_layers % lay.pp:
        raise _refuse("layout.stage_layers", "DeepSpeed's pipeline cuts the layers into stages of equal count "
                      f"(partition_method type:transformer), here {num_layers} layers over {lay.pp} stages; "
                      "Megatron-LM can cut uneven stages (--pipeline-model-parallel-layout)")
    if lay.tp_comm_overlap:
        raise _refuse("layout.tp_comm_overlap", "Megatron-DeepSpeed has no --tp-comm-overlap; Megatron-LM can")
    if lay.async_tensor_model_parallel_allreduce and lay.tp > 1:
        raise _refuse("layout.async_tensor_model_parallel_allreduce", "--deepspeed turns it off "
                      "(megatron/arguments.py validate_args); Megatron-LM can")
    if lay.precision == "fp8":
        raise _refuse("layout.precision", "this export writes bf16 or fp16 (Megatron-DeepSpeed's FP8 is "
                      "Transformer Engine's, outside DeepSpeed's pipeline layers); Megatron-LM can "
                      "(--fp8-format hybrid)")
    zeropp = [f for f in _ZEROPP if getattr(lay, f) != _ZEROPP[f]]
    if zeropp and (lay.zero_stage != 3 or lay.zero_implementation != "deepspeed"):
        raise _refuse(f"layout.{zeropp[0]}", f"is a ZeRO++ option, read by DeepSpeed's ZeRO 3 optimizer alone "
                      f"(zero_optimization.{zeropp[0]}): it needs zero_stage 3 and zero_implementation deepspeed "
                      f"(given zero_stage {lay.zero_stage}, zero_implementation {lay.zero_implementation}), and "
                      "DeepSpeed ignores it otherwise")
    if lay.overlap_grad_reduce and lay.zero_stage == 0:
        raise _refuse("layout.overlap_grad_reduce", "DeepSpeed overlaps the gradient reduction with backward under "
                      "ZeRO only (zero_optimization.overlap_comm, stages 1 to 3); at ZeRO 0 it all-reduces after "
                      "backward. Set zero_stage 1, or Megatron-LM can (--overlap-grad-reduce)")


def deepspeed_config(request: SimulationRequest, *, dp: int, buckets: Mapping[str, int]) -> dict[str, Any]:
    """The ds_config.json of the layout for `dp` data-parallel ranks; `buckets`: the zero_optimization sizes the
    simulation used (service/interop.py reads them from the simulator)."""
    lay = request.layout
    steps = lay.global_batch_size // (lay.microbatch_size * dp)
    zero: dict[str, Any] = {"stage": lay.zero_stage}
    if lay.zero_stage > 0:
        zero["overlap_comm"] = lay.overlap_grad_reduce
        zero.update(buckets)
    if lay.zero_stage == 3 and lay.zero_implementation == "deepspeed":  # ZeRO++: the options the layout turns on
        zero.update({f: getattr(lay, f) for f in _ZEROPP if getattr(lay, f) != _ZEROPP[f]})
    config = {"train_batch_size": lay.global_batch_size, "train_micro_batch_size_per_gpu": lay.microbatch_size,
              "gradient_accumulation_steps": steps, "zero_optimization": zero,
              ("fp16" if lay.precision == "fp16" else "bf16"): {"enabled": True}}
    if lay.grad_reduce_dtype is not None:  # DeepSpeed's gradient reduction dtype (runtime/config.py)
        config["communication_data_type"] = lay.grad_reduce_dtype
    known = deepspeed_keys()
    unknown = [k for k in [*config, *zero] if k not in known]
    if unknown:  # a bug here, not the user's: every key above is in the recorded list (tests say so)
        raise RuntimeError(f"emitted keys not in DeepSpeed's list: {unknown}")
    return config


def _layout_flags(request: SimulationRequest) -> list[str]:
    lay = request.layout
    flags = [f"--tensor-model-parallel-size {lay.tp}", f"--pipeline-model-parallel-size {lay.pp}"]
    if lay.pp == 1:
        flags.append("--no-pipeline-parallel")  # DeepSpeed's plain engine (the pipeline engine is ZeRO <= 1)
    flags += _SCHEDULE_FLAGS.get(lay.schedule, []) if lay.pp > 1 else []
    if lay.sequence_parallel and lay.tp > 1:
        flags.append("--sequence-parallel")
    flags += [f"--micro-batch-size {lay.microbatch_size}", f"--global-batch-size {lay.global_batch_size}"]
    if lay.recompute == "full":  # GPTModelPipe checkpoints every recompute-num-layers layers (uniform only)
        flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    elif lay.recompute == "selective":
        flags.append("--recompute-granularity selective")
    flags += ["--fp16" if lay.precision == "fp16" else "--bf16", f"--zero-stage {lay.zero_stage}", "--deepspeed",
              f"--deepspeed_config {CONFIG_NAME}"]
    return flags


def deepspeed_launch(request: SimulationRequest, model: Mapping[str, Any], *, num_gpus: int, gpus_per_node: int,
                     buckets: Mapping[str, int]) -> str:
    """The launch script for a request whose model fields (preset resolved) are `model`: the config written by a
    heredoc, then the command, one flag a line."""
    lay = request.layout
    flags = _model_flags(model)
    _check_layout(request, model["num_layers"])
    config = deepspeed_config(request, dp=lay.dp, buckets=buckets)
    flags += _layout_flags(request)
    known = megatron_deepspeed_flags()
    unknown = [f.split()[0] for f in flags if f.split()[0] not in known]
    if unknown:  # a bug here, not the user's: every name above is in the recorded list (tests say so)
        raise RuntimeError(f"emitted flags not in Megatron-DeepSpeed's list: {unknown}")
    nodes, per_node = (num_gpus // gpus_per_node, gpus_per_node) if num_gpus % gpus_per_node == 0 else (1, num_gpus)
    lines = [f"deepspeed --num_nodes {nodes} --num_gpus {per_node} pretrain_gpt.py"] + ["    " + f for f in flags]
    return ("# Megatron-DeepSpeed (github.com/microsoft/Megatron-DeepSpeed): the DeepSpeed config, then the launch.\n"
            "# Add the run's data, tokenizer and optimizer flags; more than one node reads DeepSpeed's hostfile.\n"
            f"cat > {CONFIG_NAME} <<'EOF'\n{json.dumps(config, indent=2)}\nEOF\n" + " \\\n".join(lines) + "\n")
