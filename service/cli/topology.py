"""The `topology` command of `clustersim` (registered by service.cli.main): writes a cluster graph file that a
request's `cluster.topology` reads, of the shapes topology/builders.py builds, with the figures of a node preset
and any failures; the user edits it further as they like.

    topology {fat-tree,rail-optimized,multi-plane,nvl-racks} --nodes N [--preset P] [--tiers 2|3]
             [--oversubscription R] [--planes K] [--gpus-per-rack G]
             [--remove-switch NAME]... [--remove-link U V]... [--degrade-link U V SHARE]...
             [-o FILE] [--graphml]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from service.cli.usage import UsageError, positive_int, writable_file

__all__ = ["add_topology_command", "cmd_topology"]

SHAPES = ("fat-tree", "rail-optimized", "multi-plane", "nvl-racks")


def cmd_topology(args: argparse.Namespace) -> int:
    import networkx as nx

    from simcore import GB, NODE_PRESETS
    from simcore import graph_builders as b

    if args.out:
        writable_file("--out", args.out)
    if args.preset not in NODE_PRESETS:
        raise UsageError("--preset", f"unknown cluster preset '{args.preset}' (see `clustersim presets clusters`)")
    spec = NODE_PRESETS[args.preset]
    server = b.Server(gpus=spec.gpus_per_node, nics=spec.nics_per_node,
                      nvlink_gb_per_s=spec.nvlink_bandwidth_bytes_per_s / GB,
                      pcie_gb_per_s=spec.hardware.pcie_bandwidth_bytes_per_s / GB,
                      nic_gb_per_s=spec.nic_bandwidth_bytes_per_s / GB,
                      intra_latency_us=spec.intra_node_latency_s * 1e6,
                      inter_latency_us=spec.inter_node_latency_s * 1e6)
    over = args.oversubscription
    if args.shape == "fat-tree":
        g = b.fat_tree(args.nodes, server, tiers=args.tiers, oversubscription=over)
    elif args.shape == "rail-optimized":
        g = b.rail_optimized(args.nodes, server, oversubscription=over)
    elif args.shape == "multi-plane":
        g = b.multi_plane(args.nodes, server, planes=args.planes, oversubscription=over)
    else:  # nvl-racks: --nodes racks, trays of 4 GPUs with 4 NICs (GB200 NVL72's compute trays)
        tray = b.Server(gpus=4, nics=4, nvlink_gb_per_s=server.nvlink_gb_per_s, pcie_gb_per_s=server.pcie_gb_per_s,
                        nic_gb_per_s=server.nic_gb_per_s, intra_latency_us=server.intra_latency_us,
                        inter_latency_us=server.inter_latency_us)
        g = b.nvl_racks(args.nodes, tray, gpus_per_rack=args.gpus_per_rack, oversubscription=over)
    for name in args.remove_switch:
        b.remove_switch(g, name)
    for u, v in args.remove_link:
        b.remove_link(g, u, v)
    for u, v, share in args.degrade_link:
        try:
            fraction = float(share)
        except ValueError:
            raise UsageError("--degrade-link", f"SHARE must be a number in (0, 1] (given {share!r})") from None
        b.degrade_link(g, u, v, fraction)
    text = "\n".join(nx.generate_graphml(g)) + "\n" if args.graphml else json.dumps(b.node_link(g)) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text, end="")
    return 0


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 1 (given {text!r})") from None
    if not value >= 1 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 1, 1 = full bisection (given {text})")
    return value


def add_topology_command(subparsers: Any) -> None:
    """Register `topology` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser("topology", help="write a cluster graph file (node-link JSON or GraphML) for "
                                               "cluster.topology")
    p.add_argument("shape", choices=SHAPES)
    p.add_argument("--nodes", type=positive_int, required=True, help="servers (nvl-racks: racks)")
    p.add_argument("--preset", default="dgx-h100", help="node preset whose figures the graph's links carry")
    p.add_argument("--tiers", type=int, choices=(2, 3), default=2, help="fat-tree: two or three switch tiers")
    p.add_argument("--oversubscription", type=_ratio, default=1.0, help="leaf down : up ports (1 = full bisection)")
    p.add_argument("--planes", type=positive_int, default=2, help="multi-plane: separate fabrics the NICs split over")
    p.add_argument("--gpus-per-rack", type=positive_int, default=72, help="nvl-racks: GPUs per NVLink domain")
    p.add_argument("--remove-switch", action="append", default=[], metavar="NAME", help="a failed switch")
    p.add_argument("--remove-link", action="append", nargs=2, default=[], metavar=("U", "V"),
                   help="a failed link")
    p.add_argument("--degrade-link", action="append", nargs=3, default=[], metavar=("U", "V", "SHARE"),
                   help="a link at SHARE of its bandwidth")
    p.add_argument("-o", "--out", help="write the graph here (default: stdout)")
    p.add_argument("--graphml", action="store_true", help="GraphML instead of node-link JSON")
    p.set_defaults(func=cmd_topology)
