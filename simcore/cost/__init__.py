"""What things cost: the work, traffic and memory of one training iteration, from the model, layout and cluster.

Rooms:
- compute/: what a kernel costs on a GPU (FLOPs, bytes, GEMM shapes and ceilings, FP8 and FP4, the optimizer).
- comm/: what communication costs (collectives and sends over the graph's paths, NCCL's model, interference).

Beside them, what puts the rooms together:
- parameters.py: the cost model's constants, fitted (fitted.py, written by the fit) and fixed.
- fitted.py: the fitted parameters and the record of the fit that produced them.
- partition.py: how the layers are cut into pipeline stages (model chunks).
- chunk.py: the records of what a model chunk's passes cost, send and hold.
- workload.py: the work of one iteration per model chunk, built from both rooms.
- bf16_layers.py: the layers layout.bf16_layers keeps in BF16: where they sit and what they run with.
- per_gpu.py: per-GPU workloads on a heterogeneous cluster: every rank computes with its own GPU.
- tp_async.py: how much backward tensor-parallel time Megatron's asynchronous collectives hide under GEMMs.
- context_parallel.py: context parallelism's attention per layer: the blocks it computes and what it sends.
- moe.py: a mixture of experts' and latent attention's kernels, and the expert-parallel all-to-all.
- mtp.py: multi-token prediction's depths on the last stage: their kernels and collectives.
- sharding.py: how each framework runs ZeRO 3: gather units, prefetch, synchronisations, reductions.
- zeropp.py: what DeepSpeed's ZeRO++ options cost: their collectives' bytes and quantization kernels.
- layer_params.py: a transformer layer's parameter tensors module by module (gather units, gradient buckets).
- memory.py: memory per GPU of each pipeline stage: model states, activations in flight, buffers.
- measured_notes.py: where a simulation extrapolated from the user's measurements, as its warnings.
"""
