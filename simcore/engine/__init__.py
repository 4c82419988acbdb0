"""How time passes: one training iteration as events on a SimPy clock over the cluster's links.

Rooms:
- data_parallel/: gradient reduction and ZeRO's gathers on each rank's communication stream.
- steady_state/: the periodic steady state: periods left out, checked, and put back by arithmetic.

Beside them:
- clock.py: the engine's time, one `simpy.Environment` through its public API.
- flows.py: bandwidth sharing on the links: fluid flows with max-min fair rates.
- pipeline.py: the engine: each simulated rank runs its schedule's passes; transfers, syncs, optimizer.
- compute.py: a GPU's compute stream, slowed while collectives are in flight beside it.
- pass_work.py: what one pass costs its rank's compute stream, and how that time splits.
- pass_spans.py: a pass as the trace shows it: named spans on its rank's compute track.
- pair_overlap.py: DualPipe's overlapped forward and backward pair on a mixture of experts.
- transfers.py: pipeline transfers between stages as flow groups, and the arrivals passes wait for.
- tp_links.py: tensor-parallel collectives on the links, for groups that cross NVLink domains.
- context_parallel.py: context parallelism's ring steps and gathers as events.
- watch.py: what may observe a rank's passes as they run (the steady state's check).
- recorder.py: what the engine observed: time by category per rank, and spans for a trace.
"""
