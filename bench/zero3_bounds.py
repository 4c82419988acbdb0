"""How far DeepSpeed's scheduling can explain the ZeRO++ evaluation's ZeRO-3 rows (sharded-dp.json, group
`zeropp-blog`): for each ZeRO-3 row, the measured step time, the prediction, and two bounds built from the rows'
own evidence.

- serial: the prediction with no prefetch at all (every gather on demand, nothing overlapped with the compute but
  what the reduce-scatters overlap): the slowest DeepSpeed's scheduling can make the step. `residual` is what the
  measured time has beyond it, per parameter of the model and step (ns): a cost no gather or reduce-scatter
  schedule accounts for.
- pair: where the blog measured ZeRO++ at the same model, tokens and network, the ZeRO-3 row's extra time over it,
  over the line-rate time of ZeRO-3's extra inter-node bytes (3 M against ZeRO++'s 0.75 M per step, M the 16-bit
  model; ring all-gathers and reduce-scatters over the links of a node): about 1 when those bytes cost their full
  transfer time, that is when they do not overlap with the compute.

Run:  python bench/zero3_bounds.py
"""

from __future__ import annotations

import dataclasses

from simcore.calibration import sharded_rows
from simcore.calibration.validate import load_reference, measured_time, scenario_for
from simcore.cost import sharding
from simcore.domain.layout import ZeroImplementation
from simcore.simulate import simulate

EXTRA_VOLUME = 3.0 - 0.75  # ZeRO-3's inter-node traffic over ZeRO++'s, in M per step (the ZeRO++ blog's table)


def predicted(case: dict[str, object], serial: bool) -> float:
    saved = sharding.POLICIES[ZeroImplementation.DEEPSPEED]
    if serial:
        sharding.POLICIES[ZeroImplementation.DEEPSPEED] = dataclasses.replace(saved, forward_depth=0,
                                                                              backward_depth=0)
    try:
        return simulate(scenario_for(case)).metrics.iteration_time_s
    finally:
        sharding.POLICIES[ZeroImplementation.DEEPSPEED] = saved


def main() -> None:
    rows = {str(c["id"]): c for c in load_reference(None, sharded_rows.REFERENCE)}
    print(f"{'row':44s} {'measured':>9s} {'predicted':>9s} {'serial':>8s} {'residual':>9s} {'pair':>5s}")
    for row_id, case in rows.items():
        if not row_id.startswith("zeropp-blog-zero3-"):
            continue
        measured = measured_time(case)
        assert measured is not None
        scenario = scenario_for(case)
        params = scenario.model.total_parameters()
        serial = predicted(case, True)
        residual_ns = (measured - serial) / params * 1e9
        pair = "-"
        twin = rows.get(row_id.replace("-zero3-", "-zeropp-"))
        twin_s = measured_time(twin) if twin is not None else None
        if twin_s:
            cluster, ranks = scenario.cluster, scenario.layout.dp
            node_bytes_per_s = cluster.nics_per_node * cluster.nic_bandwidth_bytes_per_s
            line_s = EXTRA_VOLUME * 2 * params * (ranks - 1) / ranks / node_bytes_per_s
            pair = f"{(measured - twin_s) / line_s:.2f}"
        print(f"{row_id:44s} {measured:9.2f} {predicted(case, False):9.2f} {serial:8.2f} {residual_ns:9.3f} "
              f"{pair:>5s}")


if __name__ == "__main__":
    main()
