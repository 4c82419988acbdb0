"""The `search` and `sweep` commands of `clustersim` (registered by service.cli.main through add_search_commands).

    search FILE [--json] [--top K] [--max-candidates N] [--time-limit S] [--executor local|ray] [--address A]
                [--workers N] [--plot OUT.svg|OUT.png] [--no-limits] [--export megatron|torchtitan|deepspeed]
    sweep FILE [--out DIR] [--executor local|ray] [--address A] [--workers N]   (DIR/mfu.svg: a chart of MFU
                                                                                 against the grid's first field)

Both show a progress bar on stderr (rich) while they run; the search prints a table (or its JSON with --json)
on stdout, the sweep a one-line summary. Also runnable on its own: python -m service.cli.search search FILE.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service.cli import rendering
from service.cli.plot import check_plot_target
from service.cli.usage import check_executor, job_limits, writable_dir
from service.naming import gpu_label, precision_name

DISCARDED_SHOWN = 12


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def _executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local", metavar="{local,ray}",
                   help="local: a process pool on this machine (default); ray: Ray tasks (pip install clustersim[ray])")
    p.add_argument("--address", metavar="A", help="Ray cluster address (with --executor ray; default: a local Ray)")
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="worker processes (local) or at most N Ray tasks at once (default: every CPU)")


def add_search_commands(subparsers: Any) -> None:
    """Register `search` and `sweep` on the CLI's subparsers (argparse's _SubParsersAction)."""
    p = subparsers.add_parser("search", help="find the fastest layouts for a model, cluster and global batch")
    p.add_argument("file", help="search request (YAML or JSON), or a simulation request to search around")
    p.add_argument("--json", action="store_true", help="print the result JSON instead of tables")
    p.add_argument("--top", type=_positive_int, metavar="K", help="layouts to return (default: bounds.top_k, 5)")
    p.add_argument("--max-candidates", type=_positive_int, metavar="N",
                   help="simulate at most N layouts, most promising first (default: bounds.max_candidates, 500)")
    p.add_argument("--time-limit", type=_positive_float, metavar="S",
                   help="stop after S seconds, planning included; a simulation running then is stopped "
                   "(default: bounds.time_limit_s, none)")
    p.add_argument("--exhaustive", action="store_true",
                   help="simulate every feasible layout in the estimate's order (up to the other bounds), not only "
                   "those that can still beat the best simulated")
    p.add_argument("--plot", metavar="FILE", help="draw the top layouts and the discarded families (.svg or .png)")
    p.add_argument("--export", choices=("megatron", "torchtitan", "deepspeed"),
                   help="print the best layout's launch configuration")
    p.add_argument("--no-limits", action="store_true",
                   help="simulate even candidates over a job's limits (estimated engine events, memory), which are "
                   "otherwise screened: listed with their estimate, not simulated")
    _executor_options(p)
    p.set_defaults(func=cmd_search)
    p = subparsers.add_parser("sweep", help="simulate a grid of requests into JSON Lines and CSV (resumable)")
    p.add_argument("file", help="sweep request: {base: <simulation request>, grid: {field.path: [values]}}")
    p.add_argument("--out", metavar="DIR", help="output directory (default: FILE's name + '-sweep', beside it)")
    _executor_options(p)
    p.set_defaults(func=cmd_sweep)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr, started on the first update (after the executor has started its workers,
    so that no thread exists when they fork) and cleared at the end."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           console=Console(stderr=True), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(label, total=total)
        state["bar"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()


def _fmt_tokens(value: float) -> str:
    return f"{value:,.0f}"


def render_search(result: dict[str, Any]) -> None:
    """The search result as tables on stdout."""
    from rich.table import Table

    console = rendering.console()
    problem, search = result["problem"], result["search"]
    sizes = problem["cluster_sizes"]
    gpus = "/".join(str(size["num_gpus"]) for size in sizes) if len(sizes) > 1 else str(problem["num_gpus"])
    console.print(f"{problem['model']} ({problem['parameters'] / 1e9:.1f}B parameters) on {gpus} "
                  f"{gpu_label(str(problem['gpu']))} GPUs, global batch {problem['global_batch_size']}, ranked by "
                  f"{problem['objective']}")
    console.print(f"{search['generated']} layouts generated, {search['pruned']} discarded before simulation "
                  f"({search['discarded']['invalid']} break a layout rule, {search['discarded']['memory']} do not "
                  f"fit), {search['simulated']} of {search['feasible']} simulated (stopped by: "
                  f"{search['stopped_by']})")
    if search.get("could_win") == 0:
        kinds = search["estimate_error"]
        over = search.get("screened_could_win", 0)
        console.print(f"proven best within the estimate's measured error: no layout left can beat it (the estimate "
                      f"was checked on {sum(k['simulated'] for k in kinds)} layouts of {len(kinds)} kinds)"
                      + (f", but {over} screened over the limits could (--no-limits simulates them)" if over else ""))
    elif search.get("could_win"):
        console.print(f"not proven: {search['could_win']:,} layouts not simulated could still beat the best")
    if search.get("stopped_running"):
        console.print(f"{search['stopped_running']} simulations stopped at the time limit")
    if search["screened"]:
        first = result["screened"][0]
        console.print(f"{search['screened']} screened, not simulated (over the limits; --no-limits simulates them): "
                      f"first {first['summary']}: {first['reason']}")
    run = any("training" in entry for entry in result["top"])
    table = Table(title="Fastest layouts (simulated)" if problem["objective"] == "time" else
                  f"Best layouts by {problem['objective']} (simulated)")
    columns = ["#", "layout", "CP", "EP", "GPUs", "GPU", "precision", "tokens/s", "MFU", "bubble",
               "exposed comm s (tp/pp/dp)", "headroom GiB"]
    for column in columns + (["days", "GPU-hours", "cost USD", "goodput"] if run else []):
        table.add_column(column, justify="left" if column in ("layout", "GPU", "precision") else "right")
    gpu = gpu_label(str(problem["gpu"]))  # one kind for the whole search
    for entry in result["top"]:
        exposed, layout = entry["exposed_communication_s"], entry["layout"]
        precision = precision_name(layout.get("precision"), layout.get("fp8_recipe"), layout.get("fp8_scaling"))
        row = [str(entry["rank"]), entry["summary"], str(layout.get("cp") or 1), str(layout.get("ep") or 1),
               str(entry["num_gpus"]), gpu, precision,
               _fmt_tokens(entry["tokens_per_s"]),
               f"{100 * entry['mfu']:.1f}%", f"{100 * entry['bubble_fraction']:.1f}%",
               f"{exposed['tp']:.2f}/{exposed['pp']:.2f}/{exposed['dp']:.2f}",
               f"{entry['memory']['headroom_gib']:.1f}"]
        if run:
            totals, goodput = entry["training"]["with_failures"], entry["training"]["goodput"]
            cost = totals.get("cost_usd")
            row += [f"{totals['days']:.2f}", f"{totals['gpu_hours']:,.0f}",
                    f"{cost:,.0f}" if cost is not None else "-", f"{goodput:.3f}"]
        table.add_row(*row)
    console.print(table)
    if result["best"] is not None:
        console.print(f"Best: {result['best']['summary']}")
        for line in result["best"]["why"]:
            console.print(f"  - {line}")
    else:
        console.print("No layout could be simulated: every one was discarded (reasons below).")
    baseline = result.get("baseline")
    if baseline is not None:
        speedup = baseline.get("best_speedup")
        versus = f"; the best is {speedup:.2f}x as fast" if speedup is not None else ""
        console.print(f"Baseline {baseline['summary']}: {_fmt_tokens(baseline['tokens_per_s'])} tokens/s, "
                      f"MFU {100 * baseline['mfu']:.1f}%{versus}")
    families = result["discarded_families"]
    if families:
        table = Table(title=f"Discarded families ({len(families)}): the first reason")
        for column in ("dp x tp x pp", "CP", "ZeRO", "recompute", "SP", "layouts", "reason"):
            table.add_column(column)
        for item in families[:DISCARDED_SHOWN]:
            f = item["family"]
            table.add_row(f"{f['dp']} x {f['tp']} x {f['pp']}", str(f.get("cp") or 1), str(f["zero_stage"]),
                          f["recompute"], "yes" if f["sequence_parallel"] else "no", str(item["layouts"]),
                          item["reason"])
        console.print(table)
        if len(families) > DISCARDED_SHOWN:
            console.print(f"... and {len(families) - DISCARDED_SHOWN} more families (--json lists them all)")


def cmd_search(args: argparse.Namespace) -> int:
    from api_schemas.search import load_search_file
    from service.plots import save, search_figure
    from service.search import run_search
    from service.search_limits import cap_bounds

    check_executor(args.executor, args.address)
    check_plot_target(args.plot)
    request = load_search_file(args.file)
    if args.exhaustive:
        request = request.model_copy(update={"bounds": request.bounds.model_copy(update={"exhaustive": True})})
    if not args.no_limits:  # candidates the service would not simulate as jobs are screened here too
        request = request.model_copy(update={"bounds": cap_bounds(request.bounds, job_limits()).bounds})
    with _progress("simulating") as progress:
        result = run_search(request, top_k=args.top, max_candidates=args.max_candidates,
                            time_limit_s=args.time_limit, executor=args.executor, address=args.address,
                            workers=args.workers, progress=progress)
    if args.plot:
        save(search_figure(result), args.plot)
    if args.export:  # the best layout's launch configuration instead of the tables
        from service.interop import best_request, export_config

        print(export_config(args.export, best_request(request, result)), end="")
        return 0
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render_search(result)
    if result["search"]["stopped_by"] == "interrupted":
        sys.stderr.write("clustersim: interrupted; the best of the layouts simulated so far is above\n")
        return 130
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from api_schemas.search import load_sweep_file
    from service.plots import save, sweep_rows_figure
    from service.sweep import read_rows, run_sweep

    check_executor(args.executor, args.address)
    out = args.out or str(Path(args.file).with_suffix("")) + "-sweep"
    writable_dir("--out", out)
    request = load_sweep_file(args.file)
    with _progress("sweeping") as progress:
        summary = run_sweep(request, out, executor=args.executor, address=args.address, workers=args.workers,
                            progress=progress)
    chart = Path(summary["jsonl"]).parent / "mfu.svg"
    save(sweep_rows_figure(sorted(read_rows(Path(summary["jsonl"])), key=lambda r: r["index"]), list(request.grid)),
         chart)
    print(f"{summary['points']} points: {summary['skipped']} already written, {summary['simulated']} simulated, "
          f"{summary['invalid']} invalid; {summary['jsonl']}, {summary['csv']}, {chart}")
    return 0
