"""nccl-tests' hosts on a cluster whose NVLink domain spans hosts: a GB200 NVL72 rack is one 72-GPU NVLink domain of
18 hosts (compute trays) of 4 GPUs, so a table measured over 2 hosts there measures NVLink, not the network, and
applies to the groups inside one rack; on DGX nodes 2 hosts are 2 domains
(simcore/cost/comm/measured_collectives.py)."""

from __future__ import annotations

from typing import Any

import pytest

from api_schemas import SimulationRequest
from interop.nccl_tests import parse_nccl_tests
from service import convert
from service.interop import calibrate
from simcore import build_network, simulate
from simcore.cost.comm.measured_collectives import MeasuredCollectives
from simcore.cost.comm.nccl_tuning import Collective
from topology.measured import MeasuredCollective

DP8 = {"model": {"preset": "gpt3-1.3b"}, "cluster": {"preset": "gb200-nvl72", "num_gpus": 8},
       "layout": {"dp": 8, "tp": 1, "pp": 1, "microbatch_size": 4, "global_batch_size": 32}}
HEADER = ("#                                                              out-of-place                       in-place\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong\n")


def _devices(hosts: int, per_host: int) -> str:
    """A `# Using devices` block as nccl-tests prints it (src/common.cu), ranks in order, `per_host` on each host."""
    lines = [f"#  Rank {h * per_host + d:2d} Group  0 Pid {1000 + d:6d} on slurm-gb200-207-{100 + h} device  {d} "
             "[0x01] NVIDIA GB200" for h in range(hosts) for d in range(per_host)]
    return "# Collective test starting: all_reduce_perf\n#\n# Using devices\n" + "\n".join(lines) + "\n#\n"


def _row(size: int, t_us: float, ranks: int) -> str:
    algbw = size / t_us / 1e3
    busbw = algbw * 2 * (ranks - 1) / ranks
    return (f"{size:12d} {size // 4:13d}     float     sum      -1  {t_us:8.1f}  {algbw:6.2f}  {busbw:6.2f}      0  "
            f"{t_us:8.1f}  {algbw:6.2f}  {busbw:6.2f}      0")


def _run(doc: dict[str, Any]) -> dict[str, Any]:
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def _collectives(doc: dict[str, Any]) -> Any:
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc))
    return build_network(scenario.cluster, scenario.algorithm).collectives


def test_two_hosts_of_an_nvl72_rack_are_one_nvlink_domain() -> None:
    model = _collectives(DP8)
    group = tuple(range(8))
    rows = [_row(1024 * 4**i, 2 * model.isolated_time(Collective.ALL_REDUCE, [group], 1024 * 4**i) * 1e6, 8)
            for i in range(12)]  # half the model's bus bandwidth for these 8 GPUs, 1 KiB to 4 GiB
    text = _devices(2, 4) + HEADER + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n"
    overlay = calibrate([(text, "all_reduce.txt")])
    table = overlay["collectives"][0]
    assert (table["ranks"], table["nodes"]) == (8, 2)  # 8 ranks on 2 hosts
    measured = {**DP8, "cluster": {**DP8["cluster"], "measured": overlay}}
    plain, slow = _run(DP8), _run(measured)
    ratio = slow["communication_s"]["dp"] / plain["communication_s"]["dp"]
    assert 1.8 <= ratio <= 2.2, ratio  # the table applies: the DP group is inside the rack, as its hosts were
    # the same table on two DGX H100 nodes' worth of hosts measures the network: not this in-node group's
    dgx = {**DP8, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
           "layout": {**DP8["layout"], "dp": 16, "global_batch_size": 64}}
    tables = MeasuredCollectives(_collectives(dgx).cluster, [_table(table)])
    assert tables.domains(_table(table)) == 2
    assert tables.table_for(Collective.ALL_REDUCE, tuple(range(8))) is None


def _table(doc: dict[str, Any]) -> MeasuredCollective:
    return MeasuredCollective(doc["collective"], doc["ranks"], doc["nodes"],
                              tuple(float(p["size_bytes"]) for p in doc["points"]),
                              tuple(p["time_us"] * 1e-6 for p in doc["points"]))


# CoreWeave's published single-rack GB200 NVL72 all_reduce (72 ranks, NCCL 2.26.2; coreweave/nccl-tests README.md,
# "Expected Performance / GB200 / Single Rack", at commit 0120901a): the README shows its rows and only the last
# `# Using devices` line (rank 71 on its 18th host, device 3), so the block above it is written out here.
RACK_ROWS = [(536870912, 1806.7), (1073741824, 3108.8), (2147483648, 5589.1), (4294967296, 10094.0),
             (8589934592, 20299.0)]


def test_a_whole_rack_table_prices_groups_inside_a_rack_only() -> None:
    text = _devices(18, 4) + HEADER + "\n".join(_row(s, t, 72) for s, t in RACK_ROWS) + "\n"
    doc = parse_nccl_tests(text, "all_reduce.txt")
    assert (doc["ranks"], doc["nodes"]) == (72, 18)
    table = _table(doc)
    two_racks = {**DP8, "cluster": {"preset": "gb200-nvl72", "num_nodes": 2},
                 "layout": {**DP8["layout"], "dp": 144, "global_batch_size": 576}}
    model = _collectives(two_racks)
    tables = MeasuredCollectives(model.cluster, [table])
    assert tables.domains(table) == 1 and tables.reference(table) == tuple(range(72))
    rack = tuple(range(72))
    assert tables.table_for(Collective.ALL_REDUCE, rack) is table
    assert tables.table_for(Collective.ALL_REDUCE, tuple(range(0, 144, 2))) is None  # across the two racks

    def model_s(groups: Any, size: float) -> float:
        return model.isolated_time(Collective.ALL_REDUCE, groups, size)

    factor = tables.factor(Collective.ALL_REDUCE, (rack,), 8589934592, model_s)
    assert factor * model_s((rack,), 8589934592) == pytest.approx(20299e-6)  # the measured time, on the rack
