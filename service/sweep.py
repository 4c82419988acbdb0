"""Batch sweeps: every point of a grid over request fields simulated, written as JSON Lines and CSV.

Files in the output directory:
- `results.jsonl`: one row per grid point, in grid order: {"index", "key", "point", "status", "result" | "error"}.
  `key` is a digest of the point's full request; `result` is the simulation's result JSON without
  `simulator.wall_time_s` (so the same sweep always writes the same bytes); an invalid point (a layout that
  breaks a rule for its model) has status "invalid" and the error line instead.
- `results.csv`: the same rows flattened to the headline figures, rebuilt from the JSON Lines at the end.

Resumable: rows are appended, flushed one by one and in grid order; a sweep that is stopped and started again
reads the rows already written (dropping a last line cut off mid-write), skips their points and appends the rest,
so its final files are the ones an uninterrupted run writes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from api_schemas import RequestError, SimulationRequest
from api_schemas.search import SweepRequest
from service import convert as adapters
from service.executors import make_executor
from simcore import Scenario, SpecError, check
from simcore.engine.recorder import CATEGORIES, COMM_KINDS
from simcore.planning.worker import simulate_in_worker

RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"

Progress = Callable[[int, int], None]  # (points done, points in the grid)

_FIGURES = ("iteration_time_s", "tokens_per_s", "samples_per_s", "model_tflops_per_gpu", "mfu",
            "hardware_tflops_per_gpu", "hfu", "bubble_fraction", "pipeline_overhead")


def point_key(request: SimulationRequest) -> str:
    """A digest of the full request (defaults included): equal requests, equal keys."""
    text = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def simulate_point(task: tuple[int, Scenario]) -> tuple[int, dict[str, Any]]:
    """Simulate one point (on the worker's cached network: simcore.planning.worker); its result JSON without the
    wall time. Module level: process pools and Ray run it."""
    index, scenario = task
    result = adapters.to_response(simulate_in_worker(scenario))
    result["simulator"].pop("wall_time_s", None)
    return index, result


def _row_line(row: dict[str, Any]) -> str:
    return json.dumps(row, separators=(",", ":")) + "\n"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows already written; a last line cut off mid-write is removed from the file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):  # killed mid-write: drop the partial line
        with open(path, "r+b") as f:
            f.truncate(end)
        data = data[:end]
    rows = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise RequestError.for_field("out", f"{path}:{number} is not a results row; choose another --out") from None
    return rows


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def csv_text(rows: list[dict[str, Any]], paths: list[str]) -> str:
    """The rows flattened: index, each grid path, status, error, then the headline figures."""
    header = (["index", *paths, "status", "error", *_FIGURES, "peak_gib_per_gpu", "capacity_gib", "fits"]
              + [f"time_breakdown_s.{k}" for k in CATEGORIES] + [f"communication_s.{k}" for k in COMM_KINDS]
              + ["warnings"])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        result = row.get("result") or {}
        memory = result.get("memory", {})
        cells = [row["index"], *(row["point"].get(p) for p in paths), row["status"], row.get("error")]
        cells += [result.get(k) for k in _FIGURES]
        cells += [memory.get("peak_gib_per_gpu"), memory.get("capacity_gib"), memory.get("fits")]
        cells += [result.get("time_breakdown_s", {}).get(k) for k in CATEGORIES]
        cells += [result.get("communication_s", {}).get(k) for k in COMM_KINDS]
        cells += ["; ".join(result.get("warnings", []))]
        writer.writerow([_cell(c) for c in cells])
    return buffer.getvalue()


def _replace_text(path: Path, text: str) -> None:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class _OrderedWriter:
    """Appends rows in grid order as they complete (a finished point waits for the points before it)."""

    def __init__(self, path: Path, order: list[int]) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.order = order
        self.next = 0
        self.waiting: dict[int, dict[str, Any]] = {}

    def add(self, row: dict[str, Any]) -> None:
        self.waiting[row["index"]] = row
        while self.next < len(self.order) and self.order[self.next] in self.waiting:
            self.file.write(_row_line(self.waiting.pop(self.order[self.next])))
            self.file.flush()
            self.next += 1

    def close(self) -> None:
        self.file.close()


def run_sweep(request: SweepRequest, out_dir: str | Path, *, executor: str = "local", address: str | None = None,
              workers: int | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Run (or resume) a sweep into out_dir; returns a summary. Raises RequestError or SpecError for invalid input,
    ExecutorError when the executor cannot start or fails."""
    points = request.requests()
    paths = list(request.grid)
    keys = [point_key(r) for _, r in points]
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RequestError.for_field("out", f"{out} is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    jsonl, csv_path = out / RESULTS_JSONL, out / RESULTS_CSV

    existing = read_rows(jsonl)
    done: set[int] = set()
    for row in existing:
        index = row.get("index")
        if not isinstance(index, int) or not 0 <= index < len(points) or row.get("key") != keys[index]:
            raise RequestError.for_field("out", f"{jsonl} holds results of another sweep; choose another --out")
        done.add(index)

    todo = [i for i in range(len(points)) if i not in done]
    writer = _OrderedWriter(jsonl, todo)
    scenarios: dict[int, Scenario] = {}
    counts = {"ok": 0, "invalid": 0}
    finished = len(done)
    try:
        for i in todo:
            point, req = points[i]
            try:
                scenario = adapters.to_scenario(req)
                check(scenario)
                scenarios[i] = replace(scenario, keep_spans=False)
            except SpecError as err:
                writer.add({"index": i, "key": keys[i], "point": point, "status": "invalid",
                            "error": f"{err.field}: {err.rule}"})
                counts["invalid"] += 1
                finished += 1

        def tasks() -> Iterator[tuple[int, Scenario]]:
            for i in todo:
                if i in scenarios:
                    yield i, scenarios[i]

        def on_result(item: tuple[int, dict[str, Any]]) -> None:
            nonlocal finished
            i, result = item
            writer.add({"index": i, "key": keys[i], "point": points[i][0], "status": "ok", "result": result})
            counts["ok"] += 1
            finished += 1
            if progress is not None:
                progress(finished, len(points))

        if not scenarios:
            if progress is not None:
                progress(finished, len(points))
        else:
            with make_executor(executor, address, workers) as runner:
                if progress is not None:  # after the workers started: a progress bar's thread must not be forked
                    progress(finished, len(points))
                runner.run(simulate_point, tasks(), on_result, lambda: False)
    finally:
        writer.close()

    rows = sorted(read_rows(jsonl), key=lambda r: r["index"])
    _replace_text(jsonl, "".join(_row_line(r) for r in rows))  # a no-op unless rows were out of order
    _replace_text(csv_path, csv_text(rows, paths))
    return {"points": len(points), "skipped": len(done), "simulated": counts["ok"], "invalid": counts["invalid"],
            "jsonl": str(jsonl), "csv": str(csv_path)}
