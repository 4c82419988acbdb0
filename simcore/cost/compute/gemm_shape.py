"""A matrix product's time by its shape: how a tiled GEMM kernel spreads its output over the GPU's SMs.

A GEMM kernel (cuBLAS, CUTLASS) cuts the m x n output into TILE_M x TILE_N tiles, one thread block each, and runs
them on the GPU's SMs in waves; each block loops over k. Two mechanisms make its time depend on the shape and not
on its FLOPs alone (NVIDIA, "Matrix Multiplication Background User's Guide", docs.nvidia.com/deeplearning/
performance/dl-performance-matrix-multiplication, sections "Tile quantization" and "Wave quantization"):
- tile and wave quantization: ceil(m/TILE_M) x ceil(n/TILE_N) tiles (times the batch) run in ceil(tiles / SMs)
  waves, and the last wave's idle SMs and each edge tile's padding take time as if they computed (split-k and
  stream-k kernels, which cuBLAS also picks, are not modelled);
- a fixed cost per tile against its k loop: the multistage main loop's prologue fills its shared-memory pipeline
  (stages - 1 k-slices) before the first tensor-core instruction, and the epilogue writes the tile's output after
  the last one (CUTLASS, include/cutlass/gemm/threadblock/mma_multistage.h and epilogue/threadblock/epilogue.h).
  It is counted as `prologue_k` extra k-elements per tile (a parameter fitted with the others), so a GEMM with a
  short k (an attention score product, k = the head dimension) runs further from peak than one with a long k (a
  weight gradient, k = the tokens of a microbatch).
A wave of tiles takes 2 TILE_M TILE_N (k + prologue_k) FLOPs per SM at the SM's share of the effective peak.

A product's backward pass is two products (`gradient_products`): for C = A B (A: m x k, B: k x n), dA = dC B^T
(m x n by n x k: m, k, n) and dB = A^T dC (k x m by m x n: k, n, m). For a layer's weight (B, A being the
activations), dB is the weight gradient (W, what zero-bubble schedules defer) and its k is the microbatch's
tokens; Megatron's gradient_accumulation_fusion accumulates it into the fp32 main_grad buffer
(fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32): it reads and writes 4-byte C (MAIN_GRAD_BYTES).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GROUPED_GEMM_STREAMS", "MAIN_GRAD_BYTES", "TILE_M", "TILE_N", "Product", "gradient_products",
           "stream_ramps", "tiled_compute_s"]

# A 128 x 128 output tile: a common cuBLAS 16-bit tensor-core tile on A100 (ampere_fp16_s16816gemm_fp16_128x128_
# ldg8_f2f_stages_32x5 in training profiles), beside the 256 x 128 of the User's Guide's A100 wave example (one
# such block per SM, 108 tiles a wave). cuBLAS picks its tile per shape, in part to avoid a badly quantized last
# wave; the smaller tile bounds that loss, where the larger one, fixed, would charge shapes that cuBLAS serves
# with a smaller tile (an assumption, not fitted). One tile on every generation, so that a newer GPU (more SMs,
# a faster SM) never takes more waves nor longer ones (tests/simcore/calibration/test_gemm_monotone.py).
TILE_M = 128
TILE_N = 128
# fp32 main-gradient element read and written by the accumulating weight-gradient GEMM, over the 16-bit output
# the product would otherwise write once.
MAIN_GRAD_BYTES = 4 + 4
# Transformer Engine runs a GroupedLinear's products (the local experts' GEMMs) as one cuBLAS GEMM each, round-robin
# over this many compute streams (transformer_engine/common/gemm/cublaslt_gemm.cu, multi_stream_cublas_gemm, and
# common/util/multi_stream.cpp: num_compute_streams = 4, at v2.9 to v2.11); the CUTLASS grouped kernel is opt-in
# (NVTE_USE_CUTLASS_GROUPED_GEMM, Hopper and 16-bit only) and off by default.
GROUPED_GEMM_STREAMS = 4


@dataclass(frozen=True, slots=True)
class Product:
    """One (batched) m x k by k x n matrix product."""

    m: float
    n: float
    k: float
    batch: float = 1.0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch


def gradient_products(forward: Product) -> tuple[Product, Product]:
    """The backward pass of C = A B: (dA = dC B^T, dB = A^T dC), each with its own shape (module docstring)."""
    m, n, k, batch = forward.m, forward.n, forward.k, forward.batch
    return Product(m, k, n, batch), Product(k, n, m, batch)


def _ceil(x: float) -> float:
    return float(-(-x // 1))


def tiled_compute_s(product: Product, sm_count: int, sm_flops_per_s: float, prologue_k: float) -> float:
    """Seconds of a product's tiled main loops: its waves of tiles, each wave 2 TILE_M TILE_N (k + prologue_k)
    FLOPs per SM at `sm_flops_per_s` (one SM's effective rate). Quantization never makes it faster than its
    FLOPs at that rate, and a product with no work takes none."""
    if product.flops <= 0:
        return 0.0
    tiles = product.batch * _ceil(product.m / TILE_M) * _ceil(product.n / TILE_N)
    waves = _ceil(tiles / sm_count)
    return waves * 2.0 * TILE_M * TILE_N * (product.k + prologue_k) / sm_flops_per_s


def stream_ramps(groups: int) -> int:
    """Ramps (GEMM half-times and launches) a kernel of `groups` products pays one after another: 1 for a plain
    GEMM; a grouped GEMM's products spread over Transformer Engine's streams, whose kernels share the GPU but each
    stream's ramp up and drain in turn: ceil(groups / GROUPED_GEMM_STREAMS)."""
    return max(1, -(-groups // GROUPED_GEMM_STREAMS))
