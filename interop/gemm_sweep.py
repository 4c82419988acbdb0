"""A GEMM sweep -> the `gemm` part of a `cluster.measured` overlay: one row per measured shape, its dtype and its
rate in TFLOP/s (10^12 FLOP/s, 2mnk FLOPs a product).

Two inputs:
- CSV with a header naming the columns `m,n,k,dtype,tflops` (any order, any case; other columns ignored).
- The log of stas00/ml-engineering's MAMF-finder (compute/accelerator/benchmarks/mamf-finder.py), one progress row
  per shape tried, written with `\\r` between rows in grid mode. Versions 1-3 print
  `     3 |  712.9(mean)  713.4(median)  718.0(max) @ 4096x4096x4096        | best: ...` (a phase label such as
  `scout` may precede the figures); version 4 prints `     3  4096x4096x4096      712.9  713.4  718.0  712.9`
  under the header `#  MxNxK  mean  median  max  best` (mean, median, max TFLOP/s, then the best mean so far).
  The shape is M x N x K; the rate taken is the mean (what a training step sustains, not the best iteration); a
  shape measured more than once keeps its highest mean. The dtype is MAMF-finder's `--dtype` (default bfloat16),
  read from the log's command line or header where it appears.

dtypes: bf16 (also bfloat16, fp16, float16, half: the 16-bit tensor cores, one peak) and fp8 (float8_e4m3fn,
float8_e4m3fnuz, e4m3, fp8). Others (float32, mxfp8, nvfp4) are refused: the simulator runs no GEMM in them.
"""

from __future__ import annotations

import csv
import io
import os
import re
from typing import Any

from api_schemas import RequestError

__all__ = ["parse_gemm_sweep"]

_DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "bf16", "float16": "bf16", "half": "bf16",
           "fp8": "fp8", "float8_e4m3fn": "fp8", "float8_e4m3fnuz": "fp8", "e4m3": "fp8"}
_SHAPE = r"(\d+)x(\d+)x(\d+)"
_MAMF_V3 = re.compile(r"^\s*\d+\s*\|\s*(?:[A-Za-z-]+\s+)?([\d.]+)\(mean\)\s+[\d.]+\(median\)\s+[\d.]+\(max\)\s+@\s+"
                      + _SHAPE)
_MAMF_V4 = re.compile(r"^\s*\d+\s+" + _SHAPE + r"\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+")
_DTYPE_ARG = re.compile(r"(?:--dtype[\s=]+|\bdtype\s*[:=]\s*)([A-Za-z0-9_]+)")


def _error(source: str, line: int, rule: str) -> RequestError:
    return RequestError.for_field(f"{source}:{line}", rule)


def _dtype(value: str, source: str, line: int) -> str:
    dtype = _DTYPES.get(value.strip().lower())
    if dtype is None:
        raise _error(source, line, f"dtype {value.strip()!r} is not simulated: give bf16 (or fp16) or fp8")
    return dtype


def _point(m: float, n: float, k: float, dtype: str, tflops: float, source: str, line: int) -> dict[str, Any]:
    if min(m, n, k) < 1:
        raise _error(source, line, f"m, n and k must be >= 1 (given {m:g}, {n:g}, {k:g})")
    if not 0 < tflops <= 1e5:
        raise _error(source, line, f"tflops must be > 0 and at most 100000 (given {tflops:g})")
    return {"m": int(m), "n": int(n), "k": int(k), "dtype": dtype, "tflops": tflops}


def _csv(text: str, source: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text))
    rows = [(number, row) for number, row in enumerate(reader, start=1) if row and any(c.strip() for c in row)]
    head = [c.strip().lower() for c in rows[0][1]]
    missing = [c for c in ("m", "n", "k", "dtype", "tflops") if c not in head]
    if missing:
        raise _error(source, rows[0][0], f"the CSV header must name m, n, k, dtype and tflops (missing: "
                     f"{', '.join(missing)})")
    col = {name: head.index(name) for name in ("m", "n", "k", "dtype", "tflops")}
    points = []
    for number, row in rows[1:]:
        if len(row) != len(head):
            raise _error(source, number, f"a row of {len(row)} columns under a header of {len(head)}")
        try:
            m, n, k, tflops = (float(row[col[c]]) for c in ("m", "n", "k", "tflops"))
        except ValueError:
            raise _error(source, number, "m, n, k and tflops must be numbers") from None
        points.append(_point(m, n, k, _dtype(row[col["dtype"]], source, number), tflops, source, number))
    return points


def _mamf(text: str, source: str) -> list[dict[str, Any]]:
    found = _DTYPE_ARG.search(text)
    line_of = text.count("\n", 0, found.start()) + 1 if found else 0
    dtype = _dtype(found.group(1), source, line_of) if found else "bf16"  # MAMF-finder's default --dtype
    best: dict[tuple[int, int, int], tuple[float, int]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        for part in line.split("\r"):
            v3, v4 = _MAMF_V3.match(part), _MAMF_V4.match(part)
            if v3 is not None:
                mean, shape = float(v3.group(1)), (int(v3.group(2)), int(v3.group(3)), int(v3.group(4)))
            elif v4 is not None:
                mean, shape = float(v4.group(4)), (int(v4.group(1)), int(v4.group(2)), int(v4.group(3)))
            else:
                continue
            if shape not in best or mean > best[shape][0]:
                best[shape] = (mean, number)
    return [_point(*shape, dtype, mean, source, number) for shape, (mean, number) in best.items()]


def parse_gemm_sweep(text: str, source: str = "<gemm>") -> dict[str, Any]:
    """The overlay's `gemm` {source, points: [{m, n, k, dtype, tflops}]}; RequestError naming `source:line`."""
    stripped = text.lstrip()
    first = stripped.splitlines()[0].lower() if stripped else ""
    if {"m", "n", "k", "tflops"} <= {c.strip() for c in first.split(",")}:
        points = _csv(text, source)
    else:
        points = _mamf(text, source)
    if not points:
        raise _error(source, 1, "no GEMM rows: expected a CSV with the header m,n,k,dtype,tflops, or MAMF-finder's "
                     "log (rows `N | T(mean) T(median) T(max) @ MxNxK` or `N  MxNxK  mean median max best`)")
    return {"source": os.path.basename(source), "points": points}
