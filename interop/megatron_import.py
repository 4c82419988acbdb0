"""Megatron-LM arguments (interop/megatron_args.py) -> a request: model, layout, batch and cluster size.

Names are Megatron-LM's argparse destinations (megatron/training/arguments.py and the TransformerConfig fields it
turns into flags, at the commit interop/data/megatron_flags.txt names); defaults where an argument is absent are
Megatron's (ffn 4 x hidden, or 8/3 x hidden rounded down to a multiple of 64 with --swiglu; kv channels hidden /
heads; query groups = heads without --group-query-attention). What each maps to:
- --use-distributed-optimizer is ZeRO 1 (the optimizer states sharded over data-parallel ranks); with
  --num-distributed-optimizer-instances N > 1 over dp / N of them (`zero_shard_size`, Megatron-Core's partial
  distributed optimizer: docs/contract-hsdp.md);
- --recompute-granularity full with --recompute-method uniform and --recompute-num-layers 1 (or block with all of
  a stage's layers) is `recompute: full`; selective (or --recompute-activations) is `selective`;
- --fp8-format (hybrid or e4m3) is `precision: fp8`, --fp8-recipe delayed (the default) is `tensorwise`, and
  tensorwise (Transformer Engine's Float8CurrentScaling) `tensorwise` with `fp8_scaling: current`;
  --fp8-param-gather is `fp8_param_gather: true` (FP8 parameters, gathered in FP8; it needs --fp8-format and
  --use-distributed-optimizer, as Megatron-LM does: an error naming it otherwise);
- Megatron-Core always hides the input-gradient all-reduce under the weight-gradient GEMM:
  `async_tensor_model_parallel_allreduce: true`;
- --mtp-num-layers is `model.mtp_layers` (multi-token prediction depths on the last stage);
- --grad-reduce-in-bf16 (or --main-grads-dtype bf16) with bf16 is `grad_reduce_dtype: bf16`, and
  --accumulate-allreduce-grads-in-fp32 with fp16 is `grad_reduce_dtype: fp32` (the defaults, fp32 for bf16 and
  fp16 for fp16, are left unsaid).
Every argument not read is returned in `ignored` with its value; one that changes the answer and has no
counterpart (a partial recompute, uneven first/last pipeline stages, a hybrid Mamba model) is an error naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from api_schemas import RequestError
from interop.megatron_args import MegatronArgs

__all__ = ["Imported", "request_from_megatron"]

# Arguments whose other values change the simulated figures and have no counterpart in a request.
_UNSUPPORTED_IF_SET = {
    "decoder_first_pipeline_num_layers": "uneven first pipeline stage",
    "decoder_last_pipeline_num_layers": "uneven last pipeline stage",
    "pipeline_model_parallel_layout": "a custom pipeline layout",
    "hybrid_override_pattern": "a hybrid (Mamba) model",
    "encoder_num_layers": "an encoder (pretrain_gpt.py trains decoder-only models)",
    "num_experts_per_layer": "experts that differ by layer",
    "mtp_standalone": "multi-token prediction in a pipeline stage of its own",
    "mtp_hybrid_override_pattern": "a hybrid (Mamba) multi-token prediction block",
}
_FP8_RECIPES = {"delayed": "tensorwise", "tensorwise": "tensorwise", "mxfp8": "mxfp8", "blockwise": "blockwise"}
_FALSE = {"False", "false", "None", ""}
# --cp-comm-type (megatron/training/arguments.py: p2p, a2a, allgather or a2a+p2p, one for all layers or one a layer)
_CP_COMM = {"p2p": "p2p", "a2a": "a2a", "allgather": "all_gather"}


@dataclass(frozen=True, slots=True)
class Imported:
    """A request document, the arguments left out (with their values) and the values assumed."""

    request: dict[str, Any]
    ignored: dict[str, str] = field(default_factory=dict)
    assumed: dict[str, Any] = field(default_factory=dict)


class _Args:
    def __init__(self, args: MegatronArgs, source: str) -> None:
        self.args, self.source = args, source
        self.read: set[str] = set()

    def error(self, name: str, rule: str) -> RequestError:
        line = self.args.lines.get(name)
        where = f"{self.source}:{line}" if line else self.source
        return RequestError.for_field(where, f"--{name.replace('_', '-')}: {rule}")

    def text(self, name: str) -> str | None:
        self.read.add(name)
        value = self.args.values.get(name)
        return None if value is None or value == "None" else value

    def flag(self, name: str) -> bool:
        value = self.text(name)
        return value is not None and value not in _FALSE

    def integer(self, name: str, default: int | None = None) -> int | None:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise self.error(name, f"must be an integer (given {value!r})") from None
        if number < 0:
            raise self.error(name, f"must be >= 0 (given {number})")
        return number

    def need(self, name: str, default: int | None = None) -> int:
        value = self.integer(name, default)
        if value is None:
            raise self.error(name, "is required (the simulated model needs it)")
        return value


def _first_dense(a: _Args, layers: int) -> int:
    """--moe-layer-freq: 1 (every layer), or Megatron's pattern "([0]*k+[1]*n)" (k leading dense layers)."""
    value = a.text("moe_layer_freq")
    if value is None or value == "1":
        return 0
    match = re.fullmatch(r"\[?\(?\s*\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\s*\)?\]?", value)
    if match and int(match.group(1)) + int(match.group(2)) == layers:
        return int(match.group(1))
    raise a.error("moe_layer_freq", f"{value!r} is not supported: only 1 or leading dense layers "
                  "\"([0]*k+[1]*n)\" with k + n = --num-layers")


def _model(a: _Args) -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, heads, layers = a.need("hidden_size"), a.need("num_attention_heads"), a.need("num_layers")
    swiglu = a.flag("swiglu")
    default_ffn = int(4 * hidden * 2 / 3 / 64) * 64 if swiglu else 4 * hidden  # arguments.py's defaults
    model: dict[str, Any] = {
        "architecture": "decoder_only", "num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
        "num_kv_heads": a.need("num_query_groups", heads) if a.flag("group_query_attention") else heads,
        "ffn_hidden_size": a.need("ffn_hidden_size", default_ffn),
        "seq_length": a.need("seq_length"),
        "vocab_size": a.need("vocab_size", a.integer("padded_vocab_size")),
        "tied_embeddings": not a.flag("untie_embeddings_and_output_weights"),
        "activation": "swiglu" if swiglu else ("squared_relu" if a.flag("squared_relu") else "gelu"),
    }
    assumed: dict[str, Any] = {}
    if not a.flag("group_query_attention"):
        a.text("num_query_groups")
    if a.flag("multi_latent_attention"):  # MLATransformerConfig's defaults
        model.update(attention_variant="mla", q_lora_rank=a.integer("q_lora_rank", 0), kv_lora_rank=a.need(
            "kv_lora_rank", 32), head_dim=a.need("qk_head_dim", 128), qk_rope_head_dim=a.need(
            "qk_pos_emb_head_dim", 64), v_head_dim=a.need("v_head_dim", 128))
        a.text("kv_channels")
    else:
        model["head_dim"] = a.need("kv_channels", hidden // heads)
    experts = a.integer("num_experts")
    if experts:
        moe_ffn = a.need("moe_ffn_hidden_size", model["ffn_hidden_size"])
        model.update(num_experts=experts, moe_top_k=a.need("moe_router_topk", 2), moe_ffn_hidden_size=moe_ffn,
                     first_dense_layers=_first_dense(a, layers))
        shared = a.integer("moe_shared_expert_intermediate_size", 0) or 0
        if shared % moe_ffn:
            raise a.error("moe_shared_expert_intermediate_size", f"must be a multiple of --moe-ffn-hidden-size "
                          f"({moe_ffn}): shared experts are counted in experts of that size")
        model["num_shared_experts"] = shared // moe_ffn
        factor = a.text("moe_expert_capacity_factor")
        if factor is not None:
            model["moe_capacity_factor"] = float(factor)
    depths = a.integer("mtp_num_layers", 0)
    if depths:  # Megatron-Core builds them on the last pipeline stage (multi_token_prediction.py)
        model["mtp_layers"] = depths
        if a.flag("mtp_use_repeated_layer"):
            raise a.error("mtp_use_repeated_layer", "one layer's weights shared by every multi-token prediction "
                          "depth is not simulated (each depth holds its own)")
    backend = a.text("attention_backend")
    if a.flag("use_flash_attn") or (backend is not None and backend.split(".")[-1] in ("flash", "fused", "auto")):
        model["attention"] = "flash"
    elif backend is not None and backend.split(".")[-1] in ("unfused", "local"):
        model["attention"] = "standard"
    return model, assumed


def _recompute(a: _Args, layers_per_chunk: int) -> str:
    granularity = a.text("recompute_granularity")
    if a.flag("recompute_activations"):
        granularity = "selective"
    if granularity in (None, "None"):
        a.text("recompute_method"), a.text("recompute_num_layers")
        return "none"
    if granularity == "selective":
        return "selective"
    if granularity != "full":
        raise a.error("recompute_granularity", f"must be full or selective (given {granularity!r})")
    method, count = a.text("recompute_method") or "uniform", a.integer("recompute_num_layers", 1)
    if (method == "uniform" and count == 1) or (method == "block" and count == layers_per_chunk):
        return "full"
    raise a.error("recompute_num_layers", f"{method} with {count} layers recomputes only part of each stage's "
                  "layers; the simulator recomputes all (uniform 1) or none")


def _grad_reduce(a: _Args, precision: str) -> str | None:
    """The dtype the data-parallel gradients are reduced in, where it is not the precision's default (fp32 for
    bf16, fp16 for fp16): validate_args in megatron/training/arguments.py sets accumulate_allreduce_grads_in_fp32
    for bf16 unless --grad-reduce-in-bf16 (or --main-grads-dtype bf16), and training.py passes it on as
    DistributedDataParallelConfig.grad_reduce_in_fp32 (else the parameters' dtype). A log holds the value already
    set."""
    in_bf16, in_fp32 = a.flag("grad_reduce_in_bf16"), a.flag("accumulate_allreduce_grads_in_fp32")
    main = a.text("main_grads_dtype") or "fp32"
    if main not in ("fp32", "bf16", "torch.float32", "torch.bfloat16"):
        raise a.error("main_grads_dtype", f"must be fp32 or bf16 (given {main!r})")
    if precision == "fp16":
        return "fp32" if in_fp32 else None
    if in_bf16 or (not in_fp32 and main in ("bf16", "torch.bfloat16")):
        return "bf16"
    return None


def request_from_megatron(args: MegatronArgs, *, cluster_preset: str, gpus_per_node: int,
                          num_nodes: int | None = None, source: str = "<megatron>") -> Imported:
    """The request for one Megatron-LM run; RequestError naming the argument (and its line) otherwise."""
    a = _Args(args, source)
    for name, what in _UNSUPPORTED_IF_SET.items():
        if a.text(name) is not None:
            raise a.error(name, f"{what} is not supported by the simulator")
    model, assumed = _model(a)
    tp, pp = a.need("tensor_model_parallel_size", 1), a.need("pipeline_model_parallel_size", 1)
    cp = a.need("context_parallel_size", 1)
    gpus = num_nodes * gpus_per_node if num_nodes is not None else args.world_size
    if gpus is None:
        raise RequestError.for_field("nodes", "the arguments do not say the world size (no torchrun "
                                     "--nproc_per_node/--nnodes, no world_size): give --nodes")
    if gpus % (tp * pp * cp):
        raise RequestError.for_field("nodes", f"{gpus} GPUs are not a multiple of TP x PP x CP = {tp * pp * cp}")
    dp = gpus // (tp * pp * cp)
    micro = a.need("micro_batch_size", 1)
    chunks = a.integer("num_virtual_stages_per_pipeline_rank")
    per_stage = a.integer("num_layers_per_virtual_pipeline_stage")
    if per_stage:
        if model["num_layers"] % (pp * per_stage):
            raise a.error("num_layers_per_virtual_pipeline_stage", f"must divide --num-layers / PP "
                          f"({model['num_layers']} / {pp})")
        chunks = model["num_layers"] // (pp * per_stage)
    chunks = chunks or 1
    layout: dict[str, Any] = {
        "dp": dp, "tp": tp, "pp": pp, "cp": cp,
        "ep": a.need("expert_model_parallel_size", 1), "expert_tp": a.need("expert_tensor_parallel_size", tp),
        "microbatch_size": micro, "global_batch_size": a.need("global_batch_size", micro * dp),
        "schedule": "interleaved_1f1b" if chunks > 1 else "1f1b", "virtual_stages": chunks,
        "sequence_parallel": a.flag("sequence_parallel") and tp > 1,
        "zero_stage": 1 if a.flag("use_distributed_optimizer") else 0,
        "recompute": _recompute(a, model["num_layers"] // (pp * chunks)),
        "overlap_grad_reduce": a.flag("overlap_grad_reduce"),
        "tp_comm_overlap": a.flag("tp_comm_overlap"),
        "async_tensor_model_parallel_allreduce": True,
        "precision": "fp16" if a.flag("fp16") else "bf16",
    }
    instances = a.need("num_distributed_optimizer_instances", 1)
    if instances > 1:
        if not a.flag("use_distributed_optimizer") or dp % instances:
            raise a.error("num_distributed_optimizer_instances", f"needs --use-distributed-optimizer and must divide "
                          f"the data-parallel size ({dp})")
        layout["zero_shard_size"] = dp // instances
    if not model.get("num_experts"):
        layout.pop("ep"), layout.pop("expert_tp")
    comm = a.text("cp_comm_type")
    if comm is not None and cp > 1:
        kinds = set(comm.strip("[]").replace(",", " ").replace("'", "").replace('"', "").split())
        kind = kinds.pop() if len(kinds) == 1 else ""
        if kind not in _CP_COMM:
            raise a.error("cp_comm_type", f"must be one of {', '.join(_CP_COMM)}, the same for every layer (given "
                          f"{comm!r}): the simulator runs one exchange, and a2a+p2p is not modelled")
        layout["cp_comm"] = _CP_COMM[kind]
    a.text("bf16")
    fmt = a.text("fp8_format") or a.text("fp8")  # the log names it fp8
    if fmt is not None:
        if fmt not in ("hybrid", "e4m3"):
            raise a.error("fp8_format", f"must be hybrid or e4m3 (given {fmt!r})")
        recipe = a.text("fp8_recipe") or "delayed"
        if recipe not in _FP8_RECIPES:
            raise a.error("fp8_recipe", f"must be one of {', '.join(_FP8_RECIPES)} (given {recipe!r})")
        layout.update(precision="fp8", fp8_recipe=_FP8_RECIPES[recipe])
        if recipe == "tensorwise":
            layout["fp8_scaling"] = "current"
    if a.flag("fp8_param_gather"):  # rules of arguments.py validate_args and TransformerConfig (fp8_param)
        if fmt is None:
            raise a.error("fp8_param_gather", "needs --fp8-format (Megatron-Core: fp8_param must be used together "
                          "with fp8 mode)")
        if not layout["zero_stage"]:
            raise a.error("fp8_param_gather", "needs --use-distributed-optimizer (Megatron-LM runs it only with the "
                          "distributed optimizer or FSDP)")
        layout["fp8_param_gather"] = True
    reduce = _grad_reduce(a, layout["precision"])
    if reduce is not None:
        layout["grad_reduce_dtype"] = reduce
    cluster: dict[str, Any] = {"preset": cluster_preset}
    cluster.update({"num_nodes": num_nodes} if num_nodes is not None else {"num_gpus": gpus})
    ignored = {k: v for k, v in sorted(args.values.items()) if k not in a.read}
    return Imported(request={"model": model, "cluster": cluster, "layout": layout}, ignored=ignored,
                    assumed=assumed)
