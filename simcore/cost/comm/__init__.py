"""What communication costs: collectives and sends as flow patterns over the real paths of the cluster graph,
NCCL's algorithm choice and kernels, and what communication takes from compute beside it.

- patterns.py: link-load patterns: which links a transfer loads and by how much per unit of its progress.
- collectives.py: collective algorithms as flow patterns, their phases and the algorithm NCCL would choose.
- link_loads.py: each algorithm's hops as link loads (bytes per byte of the buffer on each link).
- sends.py: point-to-point sends (pipeline activations and gradients, context-parallel ring steps).
- groups.py: groups of GPUs that are copies of one group (every replica's TP group, every DP group).
- symmetry.py: the patterns of many groups from their first NVLink domain's, where the others are copies.
- translation.py: the kept links of a pattern of many equally spaced hops, counted per translation class.
- nccl_tuning.py: NCCL's tuning model: algorithm, protocol, latency and bandwidth of a collective.
- nccl_kernels.py: how NCCL's NVLS kernels run, where NCCL's own estimate misses.
- measured_collectives.py: collective times from the user's nccl-tests tables, as a factor on the model's.
- interference.py: compute beside communication kernels runs slower (the SMs and HBM the channels take).
- tp_time.py: seconds and bytes of one tensor-parallel collective, alone on the links.
- grad_buckets.py: how the frameworks bucket gradients for the data-parallel reduction.
"""
