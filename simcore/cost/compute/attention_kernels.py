"""The measured rate of Transformer Engine's fused FP8 attention kernel (cuDNN's FP8 scaled dot-product attention),
forward and backward, on the GPUs it was measured on: what `layout.fp8_attention` runs at there.

Source: simcore/calibration/reference/attention-kernels.json, NVIDIA's cudnn-frontend benchmarks of cuDNN's SDPA
(benchmark/sdpa_benchmark_training/benchmark_fp8_sdpa.py on B200, GB200 and GB300: batch 1, 128 query and 8
key/value heads of 128, causal; benchmark/sdpa_benchmark on H200: 16 heads of 128, causal, batch 2 at 8,192
tokens), TFLOP/s counted as the model counts a fused kernel's work (4 b s^2 h d / 2 causal forward, 2.5 x that
backward: kernels.flash_attention_op, FLASH_BACKWARD_FACTOR). tests/simcore/cost/compute/test_attention_kernels.py
checks the figures below against that file.

Why measured rates and not the 16-bit kernel's rate x an FP8 factor: the attention kernel is not a GEMM. Its
softmax (exponentials on the special-function units, the running max and sum on the fp32 pipes) costs the same in
FP8 as in 16 bits, so FP8 speeds the kernel up far less than it speeds a GEMM up: at 8,192 tokens cuDNN's FP8
forward is 1.09-1.53 x its BF16 forward and the backward 1.04-1.32 x (the table below against the file's bf16
rows), where the FP8/BF16 GEMM ceiling ratio is 1.85-1.97 (gemm_ceilings.FP8_OVER_BF16_CEILING). The figure is
the 8,192-token row (MEASURED_AT_TOKENS), the sequence length of the runs that use FP8 attention in the reference
data; the kernel's rate still rises with length (GB200's forward: 1,661 TFLOP/s at 4,096 tokens, 2,033 at 16,384),
which one large-kernel figure and the fitted ramp time do not follow. It is read as a fraction of the GPU's FP8
peak (topology/hardware.py) and, like a GEMM's, reached by a large kernel, a small one paying the generation's
ramp time on top.

Each GPU takes its own measurement, in the newest container that has one (the versions are the file's: B200 and
GB300 in PyTorch NGC 25.09 with cuDNN 9.13.1, the container of MLPerf Training v5.1; GB200 only in 25.11 with
9.17.0; H200 with cuDNN 9.1.0). H100 takes H200's fraction (the same GH100 compute; topology/hardware.py gives them
equal peaks) and B300 GB300's (the same Blackwell Ultra GPU). Any other GPU (L40S, a user-defined one) keeps the
16-bit kernel's rate x the FP8/BF16 GEMM ceiling ratio (simcore/cost/compute/fp8_attention.py).
"""

from __future__ import annotations

from topology.hardware import GPUS, GpuKind, GpuSpec

__all__ = ["FP8_ATTENTION_FLOPS_PER_S", "MEASURED_AT_TOKENS", "SAME_GPU", "fp8_attention_efficiency"]

MEASURED_AT_TOKENS = 8192
# (forward, backward) FLOP/s of the causal FP8 kernel at MEASURED_AT_TOKENS, per measured GPU kind
FP8_ATTENTION_FLOPS_PER_S: dict[str, tuple[float, float]] = {
    "h200-141gb": (985.71e12, 602.80e12),
    "b200-180gb": (1502.114e12, 1254.687e12),
    "gb200-186gb": (1894.0e12, 1263.0e12),
    "gb300-288gb": (2073.58e12, 1513.772e12),
}
# GPUs without a measurement of their own that are the measured one's silicon: kind -> measured kind
SAME_GPU = {"h100-80gb": "h200-141gb", "b300-288gb": "gb300-288gb"}


def fp8_attention_efficiency(gpu: GpuSpec, backward: bool) -> float | None:
    """The fraction of its FP8 peak a large fused FP8 attention kernel reaches on `gpu`, forward or backward, where
    it was measured (or on the same GPU); None elsewhere (a user-defined GPU's figures are not its kind's)."""
    if gpu.name:
        return None
    kind = SAME_GPU.get(str(gpu.kind), str(gpu.kind))
    rates = FP8_ATTENTION_FLOPS_PER_S.get(kind)
    if rates is None:
        return None
    return rates[1 if backward else 0] / GPUS[GpuKind(kind)].peak_fp8_flops_per_s
