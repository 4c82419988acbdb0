"""What a kernel costs on a GPU: FLOPs and bytes of each kernel of a layer and their time (seconds).

- flops.py: model FLOPs (the contract's definition) and the hardware FLOPs that recomputation adds.
- kernels.py: every kernel of a transformer layer, its FLOPs and bytes.
- kernel_time.py: a kernel's time on a GPU (roofline, GEMM shape or measured sweep) and the host's time to issue it.
- gemm_shape.py: a matrix product's time by its shape (tiles and waves over the SMs).
- gemm_ceilings.py: the best GEMM throughput measured per GPU and dtype, the ceiling no modelled GEMM exceeds.
- measured_gemm.py: GEMM times from the user's own sweep in place of the roofline's, as a factor.
- eager.py: a layer's elementwise kernels as PyTorch eager runs them, one HBM round trip each.
- fp8.py: FP8 training: the GEMMs at the FP8 rate and the kernels FP8 adds, per scaling recipe.
- fp8_attention.py: FP8 attention: the fused kernel at the FP8 rate, its casts, what it keeps and sends in FP8.
- attention_kernels.py: the measured rate of the fused FP8 attention kernel, forward and backward, per GPU.
- flash2.py: FlashAttention-2's kernels (PyTorch SDPA's default) at their measured Hopper rate.
- nvfp4.py: NVFP4 training: which GEMMs run in FP4, the quantization kernels, the FP4 GEMM's rate.
- moe_kernels.py: a layer's kernels with multi-head latent attention or a mixture of experts.
- weight_cache.py: FP8 weights quantized (or transposed) again every microbatch, without TE's weight cache.
- lora.py: the kernels of a LoRA step: frozen base projections, the adapters' GEMMs beside them.
- weight_gradients.py: which part of a backward pass computes weight gradients and which input gradients.
- optimizer.py: the optimizer step's kernels (mixed-precision Adam at HBM bandwidth).
"""
