"""An nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf) -> the
tables of a `cluster.measured` overlay: per collective, its ranks and nodes and its time and bus bandwidth at each
size, out of place and in place.

The layout is nccl-tests' own (NVIDIA/nccl-tests src/common.cu): a `# Using devices` header with one line per rank,
`#  Rank  0 Group  0 Pid  1234 on  host device  0 [0x07] NVIDIA H100 80GB HBM3` (before 2022 without `Group`), then
a column header `#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong` (the
first time/algbw/busbw out of place, the second in place; older builds print `error` for `#wrong` and leave out
`redop` or `root` for some collectives; `time` is `cputime` with `-C 1`) and one row per size. Columns are found by
that header, not by position. Ranks are the rank lines of rank 0's group; nodes the distinct host names among them.
`size` is the collective's whole buffer in bytes, `time` microseconds, algbw = size / time and busbw = algbw x the
collective's factor (GB/s): 2(n-1)/n for all_reduce (src/all_reduce.cu AllReduceGetBw; (n-1)/(n+1) only under
NCCL_ALGO=NVLS), (n-1)/n for all_gather, reduce_scatter and alltoall, 1 for sendrecv (all_gather.cu,
reduce_scatter.cu, alltoall.cu, sendrecv.cu). The simulator reads `time` (out of place); busbw is kept beside it.

Which collective a file holds: the `# Collective test starting: all_reduce_perf` line of newer builds, else the
one `<collective>_perf` the file names (the command line pasted above the output), else the file's name
(all_reduce.txt). Lines prefixed by srun's `--label` (`0: `) are read without the prefix. A row of another data
type or operation than the first row's (`-d all`, `-o all`) is skipped: one table per collective and scope.
"""

from __future__ import annotations

import os
import re
from typing import Any

from api_schemas import RequestError

__all__ = ["COLLECTIVES", "parse_nccl_tests"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
_LABEL = re.compile(r"^\s*\d+:\s?")
_STARTING = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_NAMED = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
                   r"\[[^\]]*\]\s*(.*)$")


def _error(source: str, line: int, rule: str) -> RequestError:
    return RequestError.for_field(f"{source}:{line}", rule)


def _collective(text: str, source: str) -> str:
    started = {m.group(1) for m in _STARTING.finditer(text)} & set(COLLECTIVES)
    named = started or {m.group(1) for m in _NAMED.finditer(text)}
    if len(named) == 1:
        return named.pop()
    if not named:
        base = os.path.basename(source).lower()
        named = {c for c in COLLECTIVES if c in base or c.replace("_", "") in base.replace("_", "")}
        if len(named) == 1:
            return named.pop()
    raise _error(source, 1, "cannot tell which collective this is (" + (", ".join(sorted(named)) if named else
                 "none named") + "): keep nccl-tests' command line in the file, or name the file after its "
                 f"collective ({', '.join(COLLECTIVES)})")


def _number(token: str, source: str, line: int, column: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise _error(source, line, f"column {column!r} is not a number (given {token!r})") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _error(source, line, f"column {column!r} is not a finite number (given {token!r})")
    return value


def parse_nccl_tests(text: str, source: str = "<nccl-tests>") -> dict[str, Any]:
    """One overlay table {collective, ranks, nodes, gpu, source, points: [{size_bytes, time_us, busbw_gb_per_s,
    in_place_time_us, in_place_busbw_gb_per_s}]}; RequestError naming `source:line` and the rule otherwise."""
    lines = [_LABEL.sub("", raw, count=1) if _LABEL.match(raw) else raw for raw in text.splitlines()]
    collective = _collective(text, source)
    ranks: dict[int, tuple[str, str]] = {}  # rank -> (host, device name), rank 0's group
    group0: str | None = None
    last_rank_line = 0
    header: list[str] | None = None
    header_line = 0
    points: list[dict[str, Any]] = []
    first_kind: tuple[str, ...] | None = None
    for number, line in enumerate(lines, start=1):
        rank = _RANK.match(line.strip())
        if rank is not None:
            r, group, host, name = int(rank.group(1)), rank.group(2) or "0", rank.group(3), rank.group(4).strip()
            if group0 is None:
                group0 = group
            if group != group0:
                continue
            if r in ranks:
                raise _error(source, number, f"rank {r} is listed twice: the processes ran separate tests (an "
                             "nccl-tests build without MPI=1 under mpirun); one communicator is needed")
            ranks[r] = (host, name)
            last_rank_line = number
            continue
        stripped = line.strip()
        tokens = stripped.lstrip("#").split()
        if tokens and tokens[0] == "size" and "busbw" in tokens and ("time" in tokens or "cputime" in tokens):
            if header is not None and points:
                raise _error(source, number, "a second table: give one nccl-tests run per file")
            header, header_line = tokens, number
            continue
        if stripped.startswith("#"):
            continue
        if header is None or not stripped or not stripped[0].isdigit():
            continue
        if len(tokens) != len(header):
            raise _error(source, number, f"a row of {len(tokens)} columns under a header of {len(header)} "
                         f"(line {header_line}: {' '.join(header)})")
        times = [i for i, h in enumerate(header) if h in ("time", "cputime")]
        buses = [i for i, h in enumerate(header) if h == "busbw"]
        kind = tuple(tokens[i] for i, h in enumerate(header) if h in ("type", "redop"))
        if first_kind is None:
            first_kind = kind
        if kind != first_kind:
            continue
        size = _number(tokens[header.index("size")], source, number, "size")
        if size <= 0:
            continue  # nccl-tests' zero-byte rows (alltoall, the first rows of some runs)
        point: dict[str, Any] = {"size_bytes": int(size),
                                 "time_us": _number(tokens[times[0]], source, number, "time"),
                                 "busbw_gb_per_s": _number(tokens[buses[0]], source, number, "busbw")}
        if point["time_us"] <= 0:
            raise _error(source, number, f"time must be > 0 us (given {tokens[times[0]]})")
        if len(times) > 1 and len(buses) > 1:
            point["in_place_time_us"] = _number(tokens[times[1]], source, number, "time")
            point["in_place_busbw_gb_per_s"] = _number(tokens[buses[1]], source, number, "busbw")
        if points and point["size_bytes"] <= points[-1]["size_bytes"]:
            raise _error(source, number, f"size {point['size_bytes']} does not follow {points[-1]['size_bytes']}: "
                         "sizes must ascend (one sweep per file)")
        points.append(point)
    if not ranks:
        raise _error(source, 1, "no `# Using devices` rank lines (`#  Rank  0 Group  0 Pid ... on HOST device ...`):"
                     " the ranks and nodes of the run are unknown")
    if header is None:
        raise _error(source, last_rank_line + 1, "no nccl-tests table follows: expected the `#  size  count  type "
                     "...  time  algbw  busbw` header and its rows")
    if not points:
        raise _error(source, header_line, "the table has no rows of a size > 0")
    hosts = {host for host, _name in ranks.values()}
    names = sorted({name for _host, name in ranks.values()})
    if len(ranks) < 2:
        raise _error(source, last_rank_line, "a run on one rank measures no communication: give 2 ranks or more")
    if len(ranks) % len(hosts):
        raise _error(source, last_rank_line, f"{len(ranks)} ranks over {len(hosts)} hosts: every host must run the "
                     "same number of ranks")
    return {"collective": collective, "ranks": len(ranks), "nodes": len(hosts), "gpu": ", ".join(names),
            "source": os.path.basename(source), "points": points}
