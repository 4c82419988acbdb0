"""The `import` and `export` commands of `clustersim` (registered by service.cli.main), over service/interop.py.

    import {megatron,torchtitan,deepspeed,hf} FILE [--cluster PRESET] [--nodes N] [--model PRESET] [--json]
        a request (YAML; --json for JSON) that `clustersim simulate` runs unchanged. In YAML the keys the input
        held and the request cannot represent follow as `# ignored:` comments, with their values, and the values
        assumed as `# assumed:`; with --json both go to stderr.
    export {megatron,torchtitan,deepspeed} FILE [--rank K]
        the launch configuration of a simulation request's layout (Megatron-LM: the torchrun command;
        torchtitan: the job TOML; DeepSpeed: a script writing ds_config.json, then the Megatron-DeepSpeed
        command), or of a saved search result's best layout (`search --json`; --rank K: its K-th), or of a saved
        simulation result (`simulate`'s output: the request it echoes).
    calibrate nccl-tests FILE... [--gemm FILE [--gemm-gpu KIND]] [--out FILE] [--json]
        a `cluster.measured` overlay (YAML; --json for JSON) from nccl-tests outputs and a GEMM sweep, on stdout or
        in --out; a request's cluster.measured takes it inline or as that file's path.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from service.cli.usage import positive_int

__all__ = ["add_interop_commands", "cmd_calibrate", "cmd_export", "cmd_import", "render_import"]


def render_import(request: dict[str, Any], ignored: dict[str, Any], assumed: dict[str, Any]) -> str:
    """The request as YAML, then the ignored and assumed keys as comments (a comment never changes the request)."""
    import yaml

    text = yaml.safe_dump(request, sort_keys=False)
    for title, entries in (("ignored", ignored), ("assumed", assumed)):
        if entries:
            text += f"# {title}:\n" + "".join(f"#   {key}: {json.dumps(value)}\n" for key, value in entries.items())
    return text


def cmd_import(args: argparse.Namespace) -> int:
    from api_schemas.loading import read_request_text
    from service.interop import import_config

    result = import_config(args.kind, read_request_text(args.file), args.file, cluster=args.cluster,
                           nodes=args.nodes, model=args.model)
    if args.json:
        print(json.dumps(result.request, indent=2))
        for title, entries in (("ignored", result.ignored), ("assumed", result.assumed)):
            for key, value in entries.items():
                sys.stderr.write(f"{title}: {key}: {json.dumps(value)}\n")
    else:
        print(render_import(result.request, result.ignored, result.assumed), end="")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from service.interop import export_config, request_to_export

    print(export_config(args.kind, request_to_export(args.file, args.rank)), end="")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import yaml

    from api_schemas.loading import read_request_text
    from service.interop import calibrate

    gemm = (read_request_text(args.gemm), args.gemm) if args.gemm else None
    overlay = calibrate([(read_request_text(path), path) for path in args.files], gemm, args.gemm_gpu)
    if args.json:
        text = json.dumps(overlay, indent=2) + "\n"
    else:
        sources = " ".join(args.files + ([f"--gemm {args.gemm}"] if args.gemm else []))
        text = (f"# cluster.measured, written by `clustersim calibrate nccl-tests {sources}`\n"
                + yaml.safe_dump(overlay, sort_keys=False, width=120))
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            from service.cli.usage import UsageError

            raise UsageError("--out", f"{args.out} cannot be written ({exc.strerror or exc})") from None
    else:
        sys.stdout.write(text)
    return 0


def add_interop_commands(sub: Any) -> None:
    from service.interop import DEFAULT_CLUSTER, EXPORT_KINDS, IMPORT_KINDS

    p = sub.add_parser("import", help="a request from a Megatron-LM command line or log, a torchtitan TOML, "
                       "a ds_config.json or a config.json")
    p.add_argument("kind", choices=IMPORT_KINDS)
    p.add_argument("file", help="the command line or log (megatron), the job TOML (torchtitan), the "
                   "ds_config.json (deepspeed), the config.json (hf)")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="PRESET", help=f"default {DEFAULT_CLUSTER}")
    p.add_argument("--nodes", type=positive_int, metavar="N", help="cluster size (default: the world size the "
                   "arguments give; 1 for a config.json)")
    p.add_argument("--model", metavar="PRESET", help="deepspeed: the model preset (a ds_config.json holds none)")
    p.add_argument("--json", action="store_true", help="print JSON (ignored and assumed keys on stderr)")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("export", help="the launch configuration of a request's layout")
    p.add_argument("kind", choices=EXPORT_KINDS)
    p.add_argument("file", help="a simulation request (YAML or JSON), a saved search result (search --json) or "
                   "simulation result")
    p.add_argument("--rank", type=positive_int, metavar="K", help="a search result's K-th layout (default 1, the "
                   "best)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("calibrate", help="a cluster.measured overlay from your own nccl-tests and GEMM measurements")
    p.add_argument("kind", choices=("nccl-tests",), help="the benchmark whose outputs follow")
    p.add_argument("files", nargs="*", metavar="FILE", help="nccl-tests outputs (all_reduce_perf, all_gather_perf, "
                   "reduce_scatter_perf, alltoall_perf, sendrecv_perf), one run each")
    p.add_argument("--gemm", metavar="FILE", help="a GEMM sweep: CSV m,n,k,dtype,tflops or MAMF-finder's log")
    p.add_argument("--gemm-gpu", metavar="KIND", help="the catalog GPU the sweep ran on (gemm.gpu; needed on "
                   "node_groups of several GPUs, where it applies to the groups of that GPU)")
    p.add_argument("--out", "-o", metavar="FILE", help="write the overlay here (default stdout)")
    p.add_argument("--json", action="store_true", help="JSON instead of YAML")
    p.set_defaults(func=cmd_calibrate)
