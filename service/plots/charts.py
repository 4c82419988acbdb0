"""Charts of result documents: where the time goes, memory per stage, candidates side by side, a sweep.

Each function takes result documents (api_schemas' SimulationResult, or the same as a plain mapping, as the API
and the CLI return it) and gives a matplotlib Figure; `service.plots.style.render` turns it into SVG or PNG.
Boxes carry SVG ids (`breakdown-compute`, `memory-stage2-weights`, `capacity`) so the pictures can be read back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matplotlib.patches import Patch

from service.naming import echoed_request, request_line
from service.plots.style import COLOURS, IDLE_HATCH, LABELS, Figure, new_figure, seconds_label, style

__all__ = ["MEMORY_KINDS", "TIME_CATEGORIES", "as_document", "bar_style", "breakdown_figure", "comparison_figure",
           "memory_figure", "sweep_figure", "sweep_rows_figure", "time_bars"]

# The order of time_breakdown_s's categories in every chart: work first, then waits, then idle.
TIME_CATEGORIES = ("compute", "recompute", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "ep_comm", "optimizer",
                   "bubble", "other")
MEMORY_KINDS = ("weights", "gradients", "optimizer_states", "activations", "buffers")


def as_document(result: Any) -> dict[str, Any]:
    """A result as a plain mapping: pydantic documents are dumped, mappings taken as they are."""
    if hasattr(result, "model_dump"):
        return dict(result.model_dump())
    if isinstance(result, Mapping):
        return dict(result)
    raise TypeError(f"expected a result document or a mapping, not {type(result).__name__}")


def _categories(documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """The breakdown's categories some document spends time in, in the charts' order (unknown ones last)."""
    present = {k for d in documents for k, v in d["time_breakdown_s"].items() if v is not None and float(v) > 0}
    return [k for k in TIME_CATEGORIES if k in present] + sorted(present - set(TIME_CATEGORIES))


def bar_style(kind: str) -> dict[str, Any]:
    idle = kind == "bubble"
    return {"facecolor": COLOURS.get(kind, "#D9D9D9"), "edgecolor": "#9A9A9A" if idle else "white",
            "hatch": IDLE_HATCH if idle else None, "linewidth": 0.5}


def time_bars(ax: Any, labels: list[str], documents: list[dict[str, Any]], gid_prefix: str,
              extra: Callable[[Mapping[str, Any]], str] | None = None) -> list[str]:
    """Horizontal stacked bars of time_breakdown_s, one per document, top to bottom, each followed by its
    iteration time and MFU (and `extra`'s text); returns the categories drawn."""
    kinds = _categories(documents)
    widest = max(float(d["iteration_time_s"]) for d in documents)
    for row, doc in enumerate(documents):
        left = 0.0
        for kind in kinds:
            value = float(doc["time_breakdown_s"].get(kind, 0.0))
            if value <= 0:
                continue
            bar = ax.barh(row, value, left=left, height=0.6, **bar_style(kind))
            bar.patches[0].set_gid(f"{gid_prefix}{row}-{kind}" if len(documents) > 1 else f"{gid_prefix}{kind}")
            share = value / float(doc["iteration_time_s"])
            if value / widest > 0.07:
                ax.text(left + value / 2, row, f"{share:.0%}", ha="center", va="center", fontsize=7,
                        color="white" if kind in ("compute", "dp_comm", "tp_comm", "pp_comm") else "black")
            left += value
        ax.text(left + widest * 0.01, row, f"{seconds_label(float(doc['iteration_time_s']))}, "
                f"MFU {float(doc['mfu']):.1%}" + (extra(doc) if extra else ""), va="center", fontsize=7.5)
    ax.set_yticks(range(len(documents)), labels)
    ax.set_ylim(len(documents) - 0.5, -0.5)
    ax.set_xlim(0, widest * (1.6 if extra else 1.22))
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)
    ax.set_xlabel("seconds of one iteration, on the critical rank (the one that finishes last)")
    return kinds


def breakdown_figure(result: Any, *, title: str | None = None) -> Figure:
    """Where the time goes: time_breakdown_s as one stacked bar (an exclusive split of iteration_time_s)."""
    doc = as_document(result)
    figure = new_figure(9.0, 2.4)
    with style():
        ax = figure.add_subplot()
        kinds = time_bars(ax, ["iteration"], [doc], "breakdown-")
        ax.set_yticks([])
        figure.legend(handles=[Patch(label=LABELS.get(k, k), **bar_style(k)) for k in kinds],
                      loc="outside lower center", ncols=min(len(kinds), 8))
        figure.suptitle(title or "Where the time goes", fontsize=9.5)
    return figure


def comparison_figure(labels: Sequence[str], results: Sequence[Any], *, title: str | None = None) -> Figure:
    """Candidates side by side: one stacked bar of time_breakdown_s each, with iteration time and MFU. Under each
    label, where the result echoes its request, a line naming its parallel dimensions, GPU and precision
    (service.naming)."""
    if len(labels) != len(results) or not results:
        raise ValueError("give one label for each result, and at least one result")
    documents = [as_document(r) for r in results]
    requests = [echoed_request(d) for d in documents]
    labels = [f"{label}\n{request_line(r)}" if r is not None else label for label, r in zip(labels, requests)]
    figure = new_figure(10.0, 1.6 + 0.45 * len(documents))
    with style():
        ax = figure.add_subplot()
        kinds = time_bars(ax, list(labels), documents, "compare-")
        figure.legend(handles=[Patch(label=LABELS.get(k, k), **bar_style(k)) for k in kinds],
                      loc="outside lower center", ncols=min(len(kinds), 8))
        figure.suptitle(title or "Iteration time by category", fontsize=9.5)
    return figure


def memory_figure(result: Any, *, title: str | None = None) -> Figure:
    """Memory per GPU of each pipeline stage: stacked bars by kind against the GPU's capacity."""
    doc = as_document(result)
    stages = doc["stages"]
    capacity = (doc.get("memory") or {}).get("capacity_gib")
    figure = new_figure(max(7.0, min(11.0, 3.5 + 0.35 * len(stages))), 3.8)
    with style():
        ax = figure.add_subplot()
        tallest = 0.0
        for stage in stages:
            breakdown = ((stage.get("memory") or {}).get("breakdown_gib")) or {}
            bottom = 0.0
            for kind in MEMORY_KINDS:
                value = float(breakdown.get(kind) or 0.0)
                bar = ax.bar(stage["index"], value, bottom=bottom, width=0.7, color=COLOURS[kind],
                             edgecolor="white", linewidth=0.4)
                bar.patches[0].set_gid(f"memory-stage{stage['index']}-{kind}")
                bottom += value
            tallest = max(tallest, bottom)
        if capacity is not None:
            line = ax.axhline(float(capacity), color="#B00020", linewidth=1.0, linestyle="--", gid="capacity")
            line.set_label(f"capacity {float(capacity):.0f} GiB")
            tallest = max(tallest, float(capacity))
        ax.set_ylim(0, tallest * 1.12 if tallest > 0 else 1.0)
        ax.set_xticks([s["index"] for s in stages], [str(s["index"]) for s in stages] if len(stages) <= 32
                      else [str(s["index"]) if s["index"] % 8 == 0 else "" for s in stages])
        ax.set_xlabel("pipeline stage")
        ax.set_ylabel("GiB per GPU")
        handles: list[Any] = [Patch(facecolor=COLOURS[k], label=LABELS[k]) for k in MEMORY_KINDS]
        if capacity is not None:
            handles.append(line)
        figure.legend(handles=handles, loc="outside right center")
        figure.suptitle(title or "Memory per GPU, by pipeline stage", fontsize=9.5)
    return figure


def sweep_figure(xs: Sequence[Any], ys: Sequence[float | None] | Mapping[str, Sequence[float | None]], *,
                 x_label: str, y_label: str, title: str | None = None) -> Figure:
    """A sweep's figure against the swept field: numbers on a numeric axis (a doubling sweep on a log axis),
    anything else as categories in the order given. `ys` is one series, or several by label (one line each,
    e.g. one per value of the grid's other fields). A missing value (a point that failed) leaves a gap."""
    series = dict(ys) if isinstance(ys, Mapping) else {"": list(ys)}
    if not xs or not series or any(len(v) != len(xs) for v in series.values()):
        raise ValueError("give one y for each x in every series, and at least one point")
    numeric = all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs)
    positions = [float(x) for x in xs] if numeric else list(range(len(xs)))
    figure = new_figure(6.5 if len(series) == 1 else 8.0, 3.6)
    palette = list(dict.fromkeys(COLOURS[k] for k in ("backward", "recompute", "pp_comm", "dp_comm", "tp_comm",
                                                       "forward", "optimizer", "ep_comm")))
    with style():
        ax = figure.add_subplot()
        for n, (label, values) in enumerate(series.items()):
            points = [(p, float(y)) for p, y in zip(positions, values) if y is not None]
            ax.plot([p for p, _ in points], [y for _, y in points], marker="o", color=palette[n % len(palette)],
                    linewidth=1.4, markersize=4.5, gid=f"sweep-line-{n}" if label else "sweep-line",
                    label=label or None)
            if len(series) == 1:
                for p, y in points:
                    ax.annotate(f"{y:.3g}", (p, y), textcoords="offset points", xytext=(0, 6), ha="center",
                                fontsize=7)
        if numeric:
            distinct = sorted(set(positions))
            if len(distinct) >= 3 and all(x > 0 for x in distinct) and distinct[-1] / distinct[0] >= 8 and all(
                    abs(b / a - distinct[1] / distinct[0]) < 1e-9 for a, b in zip(distinct, distinct[1:])):
                ax.set_xscale("log", base=2)  # a doubling sweep (8, 16, 32, 64) reads best on a log axis
            ax.set_xticks(distinct, [f"{x:g}" for x in distinct])
            ax.minorticks_off()
        else:
            ax.set_xticks(positions, [str(x) for x in xs], rotation=30 if len(xs) > 6 else 0)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", color="#E5E5E5", linewidth=0.6)
        ax.set_axisbelow(True)
        if len(series) > 1:
            figure.legend(loc="outside right center", fontsize=7.5)
        figure.suptitle(title or f"{y_label} against {x_label}", fontsize=9.5)
    return figure


def sweep_rows_figure(rows: Sequence[Mapping[str, Any]], paths: Sequence[str], metric: str = "mfu") -> Figure:
    """A sweep's rows (as `clustersim sweep` writes them: point, status, result) drawn as `metric` against the
    grid's first field, one line per combination of the others; invalid points leave gaps."""
    first, others = paths[0], list(paths[1:])
    xs = list(dict.fromkeys(_hashable(r["point"].get(first)) for r in rows))
    series: dict[str, list[float | None]] = {}
    for row in rows:
        label = ", ".join(f"{p.rsplit('.', 1)[-1]} = {row['point'].get(p)}" for p in others)
        values = series.setdefault(label, [None] * len(xs))
        result = row.get("result") or {}
        if row.get("status") == "ok" and isinstance(result.get(metric), int | float):
            values[xs.index(_hashable(row["point"].get(first)))] = float(result[metric])
    return sweep_figure(xs, series if others else series[""], x_label=first, y_label=metric,
                        title=f"{metric} against {first}" + (f", by {', '.join(others)}" if others else ""))


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)
