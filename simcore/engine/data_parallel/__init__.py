"""Data parallelism and ZeRO as events: gradient reduction and parameter gathers on each rank's communication
stream, run as collectives on the flow network.

- dp_sync.py: the synchronisation: each rank's gradient buckets and ZeRO's gathers, released as passes end.
- streams.py: a rank's communication stream: its collectives one after another, each once it is ready.
- dp_collectives.py: a collective's phases run on the flow network, then a completion callback.
- sharded.py: ZeRO 3 as DeepSpeed runs it: sub-module visits behind their gathers, prefetch and syncs.
- zeropp_streams.py: ZeRO++'s streams: hpZ's gathers in the secondary group, qgZ's two all-to-alls.
- hybrid.py: hybrid sharding's (HSDP, Megatron's partial distributed optimizer) shard and replicate streams.
- embedding_sync.py: the tied embedding's gradient all-reduce across pipeline stages before the optimizer.
"""
