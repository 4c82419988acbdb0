"""NVIDIA's published MLPerf Training LLM runs (reference/mlperf-results.json, written by bench/mlperf_results.py
from mlcommons/training_results_v3.1-v5.1) as request documents (contract field names; the service converts and
simulates them: service/mlperf_table.py). Nothing is fitted on these runs.

Each run's request takes its layout from the submission's config script as the reference row gives it (TP, PP, CP,
virtual pipeline, microbatch, global batch, precision, sequence parallelism, TP-communication overlap) and fills
what every run of that kind shares, the same way for every run:
- models: `gpt3` is `gpt3-175b` (96 layers, 12,288 wide, 96 heads, 2,048 tokens: mlcommons/training
  retired_benchmarks/gpt3/megatron-lm/run_gpt3.sh @aa344c7) with MLPerf's vocabulary of 50,257 (its README)
  padded by Megatron to a multiple of 128 x TP; `llama31_8b` is `llama3-8b` and `llama31_405b` is
  `llama3-405b` (Llama 3.1 keeps Llama 3's shapes; 8,192 tokens); `llama2_70b_lora` is `llama2-70b` at 8,192
  tokens with LoRA adapters of rank 16 on the fused QKV and the attention output projection, dropout 0.1 (NVIDIA's
  implementation: mlcommons/training_results_v5.1 NVIDIA/benchmarks/llama2_70b_lora/implementations/nemo/train.py,
  `LoRA(dim=16, alpha=32, dropout=0.1, target_modules=["linear_proj", "linear_qkv"])`; v4.0's
  megatron_gpt_peft_tuning_config.yaml the same). Transformer Engine's fused (flash) attention everywhere.
- the distributed optimizer (ZeRO 1) with the gradient reduction overlapped (config_common.sh:
  USE_DIST_OPTIMIZER, OVERLAP_GRAD_REDUCE) for the pretraining benchmarks; LoRA's few trained weights without.
- context parallelism's exchange as the config's cp_comm_type gives it (`cp_comm`): the LoRA implementations of
  v4.1's B200 preview and v5.0/v5.1 default it to a2a (megatron_gpt_peft_tuning_config.yaml `cp_comm_type:
  ${oc.decode:${oc.env:CP_COMM_TYPE,'a2a'}}`), every other run leaves Megatron-Core's p2p.
- FP8 as Transformer Engine's per-tensor scaling (`tensorwise`), its scales as the row's fp8_scaling gives them
  (the config's FP8_RECIPE: delayed by default and in v3.1-v5.0, `fp8_scaling: current` for v5.1's Llama 3.1 8B,
  whose config_common.sh sets FP8_RECIPE="tensorwise"); NVFP4 as `nvfp4`. Attention in FP8 (`fp8_attention`)
  where the row says the run had it (fp8_dot_product_attention from FP8_DPA, not overridden by
  NVTE_DPA_FP8_RECIPE="F16", and not under context parallelism on a Transformer Engine before v1.10: v4.0's
  Dockerfile builds v1.6rc2, whose CP attention is 16-bit).
- LoRA's frozen base as FP8 weights (`fp8_params`) where the FP8 row says the implementation builds the model so
  (NeMo 1's fp8_params; v5.0/v5.1 custom_llama.py te.fp8_model_init); NVFP4 runs keep a 16-bit base.
- no FP8 weight cache (`fp8_weight_cache: false`) where the implementation's Hydra config sets Megatron-Core's
  `disable_parameter_transpose_cache` (NeMo 1's LoRA in v4.0 and v4.1, megatron_gpt_peft_tuning_config.yaml; v5.0
  and v5.1 pass False): the frozen FP8 weights' transposes made again every microbatch (simcore/cost/compute/
  weight_cache.py).
- NeMo's ASYM_PP_EMBED / ASYM_PP_LOSS (Llama 3.1 405B, 126 layers over PP x VP = 64 model chunks): the embedding
  and the loss each take one layer's place, so the first and last chunks hold one layer fewer (`stage_layers`).
- the cluster preset of the system's GPU (`gb200-nvl72`, `dgx-h100`, ...) at the run's GPU count, with the
  system's GPUs per node where the preset has another count (the L40S servers: 4). On GB200/GB300 NVL72 a node is
  a compute tray of 4 GPUs with one NIC each ("4x ConnectX-7 IB NDR 400 Gb/s", "4x ConnectX-8": the systems' host
  networking), and the NVLink domain (`nvlink_domain_gpus`) holds the job's GPUs of one rack: the run's GPUs over
  the racks its system names ("Tyche (8x NVIDIA GB200 NVL72)": 512 / 8 = 64, which the configs' SEGMENT=16 trays,
  Slurm's topology/block segments of one rack each, also give).
- the data-parallel gradients reduced in bf16 where the implementation says so (`grad_reduce_dtype`: NeMo 2's
  pretrain.py DistributedDataParallelConfig(grad_reduce_in_fp32=False), NeMo 1's optim grad_sync_dtype: bf16),
  and the parameter all-gather in FP8 where the config turns it on for an FP8 run (`fp8_param_gather`:
  FP8_PARAM_GATHER, FP8_PARAMS before NeMo 2); the pretraining benchmarks only (LoRA runs ZeRO 0).
- Megatron-Core's gradient bucket (`grad_bucket_elements`) where the row gives it: NeMo 2's Hydra
  `model.optim.bucket_size` (BUCKET_SIZE), which its pretrain.py passes to DistributedDataParallelConfig (v5.1's
  Llama 3.1 8B configs: 768,000,000; the v5.0 405B implementation's default: 200, a bucket per parameter).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from topology.cluster_spec import NODE_PRESETS

REFERENCE = "mlperf-results.json"
GPT3_VOCAB = 50257  # MLPerf's gpt3 vocabulary (mlcommons/training retired_benchmarks/gpt3/megatron-lm/README.md)
MODELS: dict[str, dict[str, Any]] = {
    "gpt3": {"preset": "gpt3-175b"},
    "llama31_8b": {"preset": "llama3-8b"},
    "llama31_405b": {"preset": "llama3-405b"},
    "llama2_70b_lora": {"preset": "llama2-70b", "seq_length": 8192,
                        "lora": {"rank": 16, "targets": ["qkv", "proj"], "dropout": 0.1}},
}
LAYERS = {"gpt3": 96, "llama31_8b": 32, "llama31_405b": 126, "llama2_70b_lora": 80}
PRECISIONS = {"BF16": "bf16", "FP8": "fp8", "NVFP4": "nvfp4"}


@cache
def _document() -> dict[str, Any]:
    text = resources.files("simcore.calibration").joinpath(f"reference/{REFERENCE}").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def runs() -> list[dict[str, Any]]:
    """The shipped runs, in the file's order."""
    return list(_document()["runs"])


def _padded_vocab(tp: int) -> int:
    multiple = 128 * tp  # Megatron's make-vocab-size-divisible-by (128) times TP
    return -(-GPT3_VOCAB // multiple) * multiple


def _stage_layers(run: dict[str, Any], chunks: int) -> list[int] | None:
    """Layers per model chunk where the embedding and the loss take a layer's place (None: an even split)."""
    lay = run["layout"]
    embed, loss = int(bool(lay.get("embedding_in_pipeline_slot"))), int(bool(lay.get("loss_in_pipeline_slot")))
    layers = LAYERS[run["benchmark"]]
    if not embed + loss or (layers + embed + loss) % chunks:
        return None
    per = (layers + embed + loss) // chunks
    out = [per] * chunks
    out[0] -= embed
    out[-1] -= loss
    return out


def request_for(run: dict[str, Any]) -> dict[str, Any]:
    """The simulation request of one published run (contract field names), with `training.mlperf`."""
    lay, bench = run["layout"], run["benchmark"]
    tp, pp = int(lay["tp"]), int(lay["pp"])
    model = {**MODELS[bench], "attention": "flash"}
    if bench == "gpt3":
        model["vocab_size"] = _padded_vocab(tp)
    cluster: dict[str, Any] = {"preset": run["cluster_preset"], "num_gpus": int(run["num_gpus"])}
    per_node = int(run["gpus_per_node"])
    if NODE_PRESETS[run["cluster_preset"]].gpus_per_node != per_node:
        cluster["gpus_per_node"] = per_node
        domain = run.get("nvlink_domain_gpus")
        if domain:  # compute trays of a multi-node NVLink domain, each with its own NIC per GPU
            cluster.update(nics_per_node=per_node, nvlink_domain_gpus=int(domain))
    sp = bool(lay["sequence_parallel"]) and tp > 1
    lora = bench == "llama2_70b_lora"
    layout: dict[str, Any] = {
        "dp": int(lay["dp"]), "tp": tp, "pp": pp, "cp": int(lay["cp"]),
        "microbatch_size": int(lay["microbatch"]), "global_batch_size": int(lay["global_batch"]),
        "precision": PRECISIONS[lay["precision"]], "sequence_parallel": sp,
        "tp_comm_overlap": sp and bool(lay["tp_comm_overlap"]),
        "zero_stage": 0 if lora else 1, "overlap_grad_reduce": not lora,
        "recompute": lay.get("recompute") or "none",
    }
    if not lora:  # (LoRA reduces a few adapter gradients with ZeRO 0: the dtype and the gathers do not apply)
        if lay.get("grad_reduce_dtype"):
            layout["grad_reduce_dtype"] = lay["grad_reduce_dtype"]
        if lay.get("fp8_param_gather") and layout["precision"] == "fp8":
            layout["fp8_param_gather"] = True
        if lay.get("grad_bucket_elements"):  # NeMo 2's bucket_size (simcore/cost/comm/grad_buckets.py)
            layout["grad_bucket_elements"] = int(lay["grad_bucket_elements"])
    if int(lay["cp"]) > 1 and lay.get("cp_comm"):  # the config's cp_comm_type (simcore/cost/context_parallel.py)
        layout["cp_comm"] = lay["cp_comm"]
    if lay.get("fp8_scaling") == "current" and layout["precision"] == "fp8":  # FP8_RECIPE tensorwise
        layout["fp8_scaling"] = "current"
    if lay.get("fp8_attention"):  # the configs' FP8_DPA (simcore/cost/compute/fp8_attention.py)
        layout["fp8_attention"] = True
    if lora and lay.get("fp8_params") and layout["precision"] == "fp8":  # the frozen base built in FP8
        layout["fp8_params"] = True
    if lay.get("fp8_weight_cache") is False and layout["precision"] != "bf16":  # disable_parameter_transpose_cache
        layout["fp8_weight_cache"] = False
    vp = lay.get("virtual_pipeline")
    if pp > 1 and vp:
        layout.update(schedule="interleaved_1f1b", virtual_stages=int(vp))
        stages = _stage_layers(run, pp * int(vp))
        if stages is not None:
            layout["stage_layers"] = stages
    return {"model": model, "cluster": cluster, "layout": layout,
            "training": {"mlperf": {"benchmark": bench, "version": run["version"]}}}
