"""The FP8 and Blackwell rows of the modern reference (reference/training-runs-modern.json, a copy of the
project's `training-runs-modern.json`) as scenarios for `validate`.

Fitted and judged rows: FP8_GEMM_EFFICIENCY_RATIO (simcore/cost/compute/fp8.py) is fitted on the step-time ratios of the
Nemotron-4-15B BF16/FP8 pairs of dgxc-benchmarking v24.11.1 (`dgxc2411-nemotron4-15b-*`, both rows of each pair
marked as calibration rows); every other row is judged: the Nemotron-4-15B pair of dgxc-benchmarking v25.05, NeMo
24.07's FP8 rows, the Llama-3-8B rows of Megatron-Bridge 25.09 / 25.11 on H100, B200 and GB200, and torchtitan's
Llama-3.1-8B rows. The Llama-3.1-8B pairs of v24.11.1 and NeMo 24.07's Llama-3-8B row run with context parallelism
2 (`layout.cp`, the ring of K/V sends, Megatron-Core's default): judged too, nothing is fitted on them. NeMo's
long-sequence Llama-2-7B rows (`nemo-longseq-*`, CP 2 at 32K and 64K tokens) publish TFLOP/s per GPU only, without
the FLOP formula: they simulate (with the microbatch of 1 their rows presume) but `validate` has no step time to
judge them by.

What each source leaves unstated is filled the same way for every row of that source, never per row:
- dgxc-benchmarking (v24.11.1, v25.05), NeMo 24.07 and NeMo's long-sequence page (DGX H100): NeMo's performance
  recipes of the time:
  Transformer Engine's fused (flash) attention, no recomputation, sequence parallelism with TP and the TP
  collectives overlapped with the GEMMs (tp_comm_overlap), the distributed optimizer (ZeRO 1) with the gradient
  reduction overlapped; FP8 rows with TE's delayed per-tensor scaling (NeMo's default recipe then; the rows mark
  the recipe unverified): `tensorwise`, delayed.
- Megatron-Bridge 25.09 / 25.11 (DGX H100, DGX B200, GB200 NVL72): the same settings; the page's precision names
  the recipe: per-tensor current scaling ("FP8-CS"; 25.09's "per-tensor current scaling") as `tensorwise` with
  `fp8_scaling: current`, "MXFP8" / "FP8-MX" as `mxfp8`; a row with `fsdp` > 0 runs Megatron-FSDP, sharding
  parameters, gradients and optimizer states over data parallelism: ZeRO 3. GB200 rows run on the `gb200-nvl72`
  preset (their 8 GPUs share the rack's NVLink domain).
- torchtitan (2024-12, H100 96 GB HBM2e at 500 W, 2.4 TB/s): FSDP2 (ZeRO 3, `zero_implementation: fsdp`), its
  selective activation checkpointing (the toml default) as `selective`, PyTorch SDPA's default flash backend,
  FlashAttention-2 (`attention_backend: flash2`, simcore/domain/attention_backend.py: the runs' torch of 2024-12
  kept cuDNN's backend opt-in and torchtitan asked for it only from its pull request #1000, 2025-03), float8
  dynamic tensorwise scaling as `tensorwise` with `fp8_scaling: current`. The GPU is not in the catalog: a
  user-defined GPU with the file's 96 GiB and 2,400 GB/s; the file says the peak of this variant, capped at 500 W, is
  unknown: assumed H100 SXM's peaks scaled by the power limit (500 of its 700 W), dense GEMMs being power-bound at
  the cap [assumption]. A row without torch.compile (`torch_compile: false`) runs its norms, rotary embedding and
  SwiGLU as PyTorch eager kernels (`elementwise_kernels: eager`, simcore/cost/compute/eager.py, from torchtitan's
  model code at the benchmark's commit); a compiled row's are fused, as the other sources' Transformer Engine kernels.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simcore.calibration.moe_rows import MOE_CALIBRATION_ROWS, moe_model_fields, recipe_batching
from simcore.domain.layout import (
    AttentionBackend,
    ElementwiseKernels,
    Fp8Recipe,
    Fp8Scaling,
    Layout,
    Precision,
    Recompute,
    Schedule,
    ZeroImplementation,
)
from simcore.domain.model import model_from_fields
from simcore.simulate import Scenario
from topology.cluster_spec import NODE_PRESETS, sized
from topology.hardware import GB, GIB, GPUS, GpuKind, GpuSpec

REFERENCE = "training-runs-modern.json"

# Source (the id's prefix) -> (recompute, ZeRO stage without fsdp); all use flash attention, SP and TP overlap.
SOURCES = {"dgxc2411": ("none", 1), "dgxc2505": ("none", 1), "nemo2407": ("none", 1), "mb2509": ("none", 1),
           "mb2511": ("none", 1), "tt2412": ("selective", 3), "nemo-longseq": ("none", 1), "automodel": ("none", 3)}
# Sources that publish no microbatch size, and the one taken: NeMo's long-sequence page (`nemo-longseq-*`, CP rows
# with TFLOP/s only) lists none; its rows say "presumably 1" (NeMo's long-sequence recipes use 1).
MICROBATCH_BY_SOURCE = {"nemo-longseq": 1}
# Sources whose sharded data parallelism is a framework's own (simcore/cost/sharding.py): torchtitan's FSDP2.
IMPLEMENTATIONS = {"tt2412": ZeroImplementation.FSDP}
# Sources whose attention is PyTorch SDPA's FlashAttention-2 (the module docstring); the others run TE's fused one.
ATTENTION_BACKENDS = {"tt2412": AttentionBackend.FLASH2}
# Sources whose framework runs PyTorch eager unless the row says it compiled (torchtitan's `compile = false` default).
EAGER_UNLESS_COMPILED = ("tt2412",)
# The rows the FP8 efficiency is fitted on (bench/fit_fp8.py).
CALIBRATION_PREFIX = "dgxc2411-nemotron4-15b-"

NODE_BY_GPU = {"h100-80gb-sxm": "dgx-h100", "b200-180gb": "dgx-b200", "gb200-b200-186gb": "gb200-nvl72"}
# torchtitan's H100 variant (module docstring): the file's memory, bandwidth and power limit; H100 SXM's peaks
# scaled by that limit over H100 SXM's TDP.
_H100 = GPUS[GpuKind.H100_80GB]
TORCHTITAN_POWER_W = 500.0
_POWER_SCALE = TORCHTITAN_POWER_W / float(_H100.tdp_w or TORCHTITAN_POWER_W)
TORCHTITAN_H100 = GpuSpec(GpuKind.H100_80GB, _H100.peak_flops_per_s * _POWER_SCALE, 96 * GIB, 2400 * GB,
                          _H100.nvlink_bandwidth_bytes_per_s, _H100.pcie_bandwidth_bytes_per_s, "hopper",
                          _H100.peak_fp8_flops_per_s * _POWER_SCALE, TORCHTITAN_POWER_W, "h100-96gb-hbm2e")


def source_of(case: dict[str, Any]) -> str:
    """A row's source: its id's first word (NeMo's long-sequence page: its first two)."""
    case_id = str(case.get("id", ""))
    return "nemo-longseq" if case_id.startswith("nemo-longseq-") else case_id.split("-", 1)[0]


def handles(case: dict[str, Any]) -> bool:
    """Whether the row comes from a source this module fills in."""
    return source_of(case) in SOURCES


def is_calibration(case: dict[str, Any]) -> bool:
    case_id = str(case.get("id", ""))
    return case_id.startswith(CALIBRATION_PREFIX) or case_id in MOE_CALIBRATION_ROWS


def precision_of(layout: dict[str, Any]) -> tuple[Precision, Fp8Recipe | None, Fp8Scaling | None]:
    """The row's precision, FP8 recipe and tensorwise scaling, from the published precision text: per-tensor current
    scaling where the text names it ("FP8-CS", "current scaling") or torchao's dynamic scaling, else Transformer
    Engine's default delayed scaling."""
    text = str(layout.get("precision", "BF16")).upper()
    if "MX" in text:
        return Precision.FP8, Fp8Recipe.MXFP8, None
    if "FP8" in text:
        current = any(word in text for word in ("-CS", "CURRENT", "DYNAMIC"))
        return Precision.FP8, Fp8Recipe.TENSORWISE, Fp8Scaling.CURRENT if current else None
    if "BF16" in text:
        return Precision.BF16, None, None
    raise ValueError(f"precision {layout.get('precision')!r} has no rule")


def model_fields(m: dict[str, Any]) -> dict[str, Any]:
    """Contract model fields for a row's decoder: Llama (SwiGLU), Nemotron (squared ReLU) or GPT-3 (GeLU)."""
    arch = str(m.get("arch", ""))
    if arch.startswith("moe") or m.get("experts"):
        return moe_model_fields(m)
    fields: dict[str, Any] = {
        "architecture": "decoder_only", "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "num_kv_heads": m.get("kv_heads", m["heads"]),
        "ffn_hidden_size": m["ffn"], "vocab_size": m["vocab"], "seq_length": m["seq_len"], "attention": "flash"}
    if "swiglu" in arch.lower():
        return {**fields, "activation": "swiglu", "tied_embeddings": False}
    if "squared-relu" in arch.lower():
        return {**fields, "activation": "squared_relu", "tied_embeddings": False}
    if arch == "gpt":  # NeMo's GPT-3 configs: GeLU, shared input and output embeddings
        return {**fields, "activation": "gelu", "tied_embeddings": True}
    raise ValueError(f"architecture {arch!r} has no rule")


def scenario_for(case: dict[str, Any]) -> Scenario:
    """The request a row describes; raises ValueError (with the reason) when it cannot be expressed."""
    source = source_of(case)
    m, c, lay = case["model"], case["cluster"], case["layout"]
    model = model_from_fields(model_fields(m))
    gpu = str(c["gpu"])
    if gpu.startswith("h100-96gb"):
        node = sized(NODE_PRESETS["dgx-h100"], int(c["num_gpus"]))
        cluster = replace(node, gpu_spec=TORCHTITAN_H100)
    elif gpu in NODE_BY_GPU:
        cluster = sized(NODE_PRESETS[NODE_BY_GPU[gpu]], int(c["num_gpus"]))
    else:
        raise ValueError(f"GPU {gpu} has no rule")
    microbatch = lay.get("microbatch_size", MICROBATCH_BY_SOURCE.get(source))
    if microbatch is None or lay.get("global_batch") is None:
        raise ValueError("the microbatch or global batch size is not published")
    # A row that publishes virtual pipeline stages ran Megatron's interleaved 1F1B with them (its `schedule` says
    # so); without them, plain 1F1B. A Megatron-Bridge row runs its recipe preset's micro batch and virtual stages
    # (simcore/calibration/moe_rows.py's RECIPE_BATCHING, where its page prints another row's).
    chunks = int(lay.get("virtual_stages") or 1)
    batching = recipe_batching(source, case)
    if batching is not None:
        microbatch, chunks = batching
    recompute, zero = SOURCES[source]
    if int(lay.get("fsdp") or 0) > 0:
        zero = 3
    precision, recipe, scaling = precision_of(lay)
    tp = int(lay["tp"])
    eager = source in EAGER_UNLESS_COMPILED and not lay.get("torch_compile", False)
    layout = Layout(dp=int(lay["dp"]), tp=tp, pp=int(lay["pp"]), microbatch_size=int(microbatch),
                    global_batch_size=int(lay["global_batch"]), recompute=Recompute(recompute),
                    sequence_parallel=tp > 1, tp_comm_overlap=tp > 1, overlap_grad_reduce=True, zero_stage=zero,
                    precision=precision, fp8_recipe=recipe, fp8_scaling=scaling, cp=int(lay.get("cp") or 1),
                    zero_implementation=IMPLEMENTATIONS.get(source, ZeroImplementation.MEGATRON),
                    ep=int(lay.get("ep") or 1), expert_tp=int(lay.get("expert_tp") or 1),
                    elementwise_kernels=ElementwiseKernels.EAGER if eager else None, virtual_stages=chunks,
                    attention_backend=ATTENTION_BACKENDS.get(source, AttentionBackend.FUSED),
                    schedule=Schedule.INTERLEAVED_1F1B if chunks > 1 else Schedule.ONE_F_ONE_B)
    return Scenario(model, cluster, layout)
