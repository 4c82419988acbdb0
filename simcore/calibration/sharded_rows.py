"""The sharded data-parallel reference (reference/sharded-dp.json, a copy of the project's `sharded-dp.json`) as
scenarios for `validate`. Nothing is fitted on these rows: every one is judged.

- IBM + Meta PyTorch FSDP (`ibm-fsdp-*`; PyTorch blog "Maximizing training throughput using PyTorch FSDP",
  2024-03-13, Table 1; code foundation-model-stack/fms-fsdp): Llama-2 shapes (SwiGLU, untied embeddings), sequence
  4096, microbatch 2, one microbatch per step (the global batch is 2 x GPUs), FSDP full shard with one unit per
  transformer block (`zero_implementation: fsdp`, simcore/cost/sharding.py), bf16, "SDPA FlashAttention v2" (the
  blog's words: PyTorch SDPA's flash backend, `attention_backend: flash2`), PyTorch eager without torch.compile
  (the blog lists torch.compile as future work): `elementwise_kernels: eager`.
  Activation checkpointing "No" is `none` and "Yes" (34B, 70B) `full`, each block checkpointed. The 13B rows'
  "Selective" is fms-fsdp's block-level selective checkpointing (fms_fsdp/policies/ac_handler.py: every n-th
  block checkpointed), which `layout.recompute` cannot express (its `selective` is Megatron's attention-core
  recomputation): those rows are skipped with that reason. The 7B rows ran HSDP: fms-fsdp's README of the blog's
  date (@7746dac9, 2024-03-13, "Training throughput benchmarks") gives the sharding strategy per model size, HSDP
  for 7B and FSDP for the larger models; its `hsdp` is FSDP1's HYBRID_SHARD (fms_fsdp/utils/train_utils.py),
  which shards within a node (torch.cuda.device_count() GPUs) and replicates across nodes: `zero_shard_size` is
  the node's GPUs (simcore/domain/hybrid_shard.py). The blog's tokens/s per GPU gives the step time:
  microbatch x sequence / (tokens/s per GPU). The network is the row's bandwidth per node, spread over the DGX
  preset's NICs (the blog gives the node's total only).
- DeepSpeed ZeRO-3 against ZeRO++ on 384 V100s (`zeropp-blog-*`; DeepSpeed blogs/zeropp, figures eval1-eval3,
  and the ZeRO++ paper, arXiv 2306.10209, section 5.1): DeepSpeed ZeRO 3 (`zero_implementation: deepspeed`).
  ZeRO++'s own rows (its "ZeRO++" bars: quantized weight gathers qwZ, hierarchical secondary partitions hpZ,
  quantized all-to-all gradient reduction qgZ; simcore/domain/zeropp.py) run all three, hpZ over each node's 16
  GPUs (the tutorial's `zero_hpz_partition_size: 16`, "ideal is number of ranks (gpus) per node"; its config
  turns the three on together). The blog publishes TFLOP/s per
  GPU, the model's size in parameters, tokens per GPU and the network per node; the rest is filled the same way
  for every row [assumptions, each marked in the reference as unverified]:
  - DGX-2 nodes (16 V100 32 GB, NVSwitch) as the paper describes its cluster; the network per node as the row
    says it, 100 Gbit/s InfiniBand links (the paper varies the number of links from 1 to 8);
  - Megatron-DeepSpeed's GPT (GeLU, tied embeddings, GPT-2's vocabulary padded to 50,304), standard attention
    (FlashAttention does not run on V100), fp16;
  - the shape: the layer count of the Narayanan'21 Table 1 model nearest in size (18.4B: 40, 39.1B: 48, 76.1B: 60,
    145.6B: 80; the 18B model is that table's 18.4B, 40 x 6144) and the hidden size (a multiple of 128, heads of 128)
    that gives the row's parameters at 12 x layers x hidden^2;
  - sequences of 512 tokens, "1K" (1,024) or "2K" (2,048) tokens per GPU as a microbatch of 2 or 4 of them, one
    microbatch per step (the paper's "2K tokens per GPU (i.e., micro batch size)"), full activation checkpointing
    (these models' activations do not fit 32 GB without it). The sequence is DeepSpeed's ZeRO++ tutorial's
    (docs/_tutorials/zeropp.md @edaa7221): the same team's 18B GPT-2 of 40 layers x 6144 on 16-V100 nodes, trained
    with `--seq-length 512`, ZeRO 3 and checkpointing, its logs reading "actual seqlen: 512";
  - the TFLOP/s as Megatron-DeepSpeed counts them (megatron/utils.py, throughput_calculator, Narayanan'21's
    equation 3 with the checkpointing factor 4): 96 x B x s x L x h^2 x (1 + s / 6h + V / 16Lh) per step, which
    gives the step time.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from simcore.domain.layout import AttentionBackend, ElementwiseKernels, Layout, Precision, Recompute, ZeroImplementation
from simcore.domain.model import model_from_fields
from simcore.simulate import Scenario
from topology.cluster_spec import NODE_PRESETS, ClusterSpec, sized

REFERENCE = "sharded-dp.json"
GBIT = 1e9 / 8  # bytes/s in a Gbit/s

FSDP_PREFIX, ZEROPP_PREFIX = "ibm-fsdp-", "zeropp-blog-"
NODE_BY_GPU = {"A100-SXM4-80GB": "dgx-a100", "H100-SXM5-80GB": "dgx-h100", "V100": "dgx-2-v100"}
FSDP_RECOMPUTE = {"none": Recompute.NONE, "full": Recompute.FULL}
# fms-fsdp's sharding strategy per model (its README's benchmark table, the module docstring); the others: fsdp.
FMS_FSDP_SHARDING = {"Llama-2 7B architecture": "hsdp"}
# Narayanan'21 Table 1's GPT models up to ZeRO++'s sizes: parameters (billions) -> layers.
MEGATRON_LAYERS = ((18.4, 40), (39.1, 48), (76.1, 60), (145.6, 80))
ZEROPP_VOCAB = 50304  # GPT-2's 50,257 tokens padded to a multiple of 128 (Megatron's make-vocab-size-divisible-by)
ZEROPP_LINK_GBIT = 100.0  # the paper's InfiniBand links, 100 Gbit/s each
ZEROPP_SEQ = 512  # DeepSpeed's ZeRO++ tutorial's sequence length (the module docstring)
CHECKPOINT_FACTOR = 4  # Megatron-DeepSpeed's TFLOP/s count with activation checkpointing


def handles(case: dict[str, Any]) -> bool:
    case_id = str(case.get("id", ""))
    return case_id.startswith((FSDP_PREFIX, ZEROPP_PREFIX))


def node_bandwidth_gbit(network: str) -> tuple[int | None, float]:
    """A row's network per node: ("4x 100 Gb/s ..." ->) the links and each one's Gbit/s, or (None, total)."""
    links = re.match(r"\s*(\d+)x\s*([\d.]+)\s*Gb/s", network)
    if links:
        return int(links.group(1)), float(links.group(2))
    total = re.match(r"\s*([\d.]+)\s*Gb/s", network)
    if total is None:
        raise ValueError(f"network {network!r} names no bandwidth per node")
    return None, float(total.group(1))


def cluster_for(hardware: dict[str, Any], link_gbit: float | None = None) -> ClusterSpec:
    """The row's GPU on its DGX preset, with the row's bandwidth per node: as that many links of the row's (or
    `link_gbit`'s) rate where it gives them, else its total spread over the preset's NICs."""
    gpu = str(hardware["gpu"])
    if gpu not in NODE_BY_GPU:
        raise ValueError(f"GPU {gpu} has no rule")
    node = NODE_PRESETS[NODE_BY_GPU[gpu]]
    links, rate = node_bandwidth_gbit(str(hardware["network"]))
    if links is None and link_gbit is not None and rate % link_gbit == 0:
        links, rate = int(rate // link_gbit), link_gbit
    if links is None:
        links, rate = node.nics_per_node, rate / node.nics_per_node
    return replace(sized(node, int(hardware["num_gpus"])), nics_per_node=links,
                   nic_bandwidth_bytes_per_s=rate * GBIT)


def zeropp_shape(params_b: float) -> tuple[int, int]:
    """(layers, hidden) for a ZeRO++ model of `params_b` billion parameters (the module docstring's rule)."""
    layers = min(MEGATRON_LAYERS, key=lambda row: abs(row[0] - params_b))[1]
    hidden = 128 * round(math.sqrt(params_b * 1e9 / (12 * layers)) / 128)
    return layers, hidden


def zeropp_samples(case: dict[str, Any]) -> int:
    """Sequences of ZEROPP_SEQ tokens in a ZeRO++ row's microbatch (its tokens per GPU, 1,024 or 2,048)."""
    tokens = int(case["layout"]["tokens_per_gpu_per_microbatch"])
    if tokens % ZEROPP_SEQ:
        raise ValueError(f"{tokens} tokens per GPU is not a whole number of {ZEROPP_SEQ}-token sequences")
    return tokens // ZEROPP_SEQ


def _fsdp_scenario(case: dict[str, Any]) -> Scenario:
    m, lay = case["model"], case["layout"]
    recompute = str(lay["recompute"])
    if recompute not in FSDP_RECOMPUTE:
        raise ValueError("fms-fsdp's block-level selective checkpointing (every n-th block) has no equivalent in "
                         "layout.recompute (whose selective is Megatron's attention-core recomputation)")
    model = model_from_fields({
        "architecture": "decoder_only", "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "num_kv_heads": m["kv_heads"], "ffn_hidden_size": m["ffn"],
        "vocab_size": m["vocab"], "seq_length": m["seq_len"], "activation": "swiglu", "tied_embeddings": False,
        "attention": "flash"})
    layout = Layout(dp=int(lay["dp"]), tp=int(lay["tp"]), pp=int(lay["pp"]),
                    microbatch_size=int(lay["microbatch"]), global_batch_size=int(lay["global_batch"]),
                    recompute=FSDP_RECOMPUTE[recompute], zero_stage=3, overlap_grad_reduce=True,
                    precision=Precision.BF16, zero_implementation=ZeroImplementation.FSDP,
                    elementwise_kernels=ElementwiseKernels.EAGER, attention_backend=AttentionBackend.FLASH2)
    cluster = cluster_for(case["hardware"])
    if FMS_FSDP_SHARDING.get(str(m.get("name"))) == "hsdp":  # HYBRID_SHARD: a node's GPUs shard
        layout = replace(layout, zero_shard_size=cluster.gpus_per_node)
    return Scenario(model, cluster, layout)


def _zeropp_scenario(case: dict[str, Any]) -> Scenario:
    lay, hardware = case["layout"], case["hardware"]
    layers, hidden = zeropp_shape(float(case["model"]["params_b"]))
    samples = zeropp_samples(case)
    model = model_from_fields({
        "architecture": "decoder_only", "num_layers": layers, "hidden_size": hidden,
        "num_attention_heads": hidden // 128, "vocab_size": ZEROPP_VOCAB, "seq_length": ZEROPP_SEQ,
        "tied_embeddings": True, "attention": "standard"})
    dp = int(lay["dp"])
    layout = Layout(dp=dp, tp=1, pp=1, microbatch_size=samples, global_batch_size=dp * samples,
                    recompute=Recompute.FULL, zero_stage=3, overlap_grad_reduce=True, precision=Precision.FP16,
                    zero_implementation=ZeroImplementation.DEEPSPEED)
    cluster = cluster_for(hardware, ZEROPP_LINK_GBIT)
    if "zeropp" in case.get("feature", ()):  # qwZ, hpZ over a node, qgZ (the module docstring)
        layout = replace(layout, zero_quantized_weights=True, zero_hpz_partition_size=cluster.gpus_per_node,
                         zero_quantized_gradients=True)
    return Scenario(model, cluster, layout)


def scenario_for(case: dict[str, Any]) -> Scenario:
    """The request a row describes; raises ValueError (with the reason) when it cannot be expressed."""
    if str(case["id"]).startswith(FSDP_PREFIX):
        return _fsdp_scenario(case)
    return _zeropp_scenario(case)


def measured_time(case: dict[str, Any]) -> float | None:
    """The row's step time from what it publishes (the module docstring gives each conversion)."""
    measured, lay = case.get("measured") or {}, case.get("layout") or {}
    if str(case["id"]).startswith(FSDP_PREFIX):
        rate = measured.get("tokens_per_s_per_gpu")
        return None if not rate else int(lay["microbatch"]) * int(lay["seq_len"]) / float(rate)
    tflops = measured.get("tflops_per_gpu")
    if not tflops:
        return None
    layers, hidden = zeropp_shape(float(case["model"]["params_b"]))
    s = ZEROPP_SEQ
    flops_per_gpu = (24 * CHECKPOINT_FACTOR * zeropp_samples(case) * s * layers * hidden**2
                     * (1 + s / (6 * hidden) + ZEROPP_VOCAB / (16 * layers * hidden)))
    return flops_per_gpu / (float(tflops) * 1e12)
