"""The picture of a layout search: the top layouts side by side (iteration time by category, with tokens/s and
MFU) and the largest families of layouts discarded before simulation, with their first reason.

Input is the search result document (service.search.run_search, POST /v1/searches). Bars carry SVG ids
(`top-0-compute`, `discarded-3`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.patches import Patch

from service.naming import gpu_label, precision_name
from service.plots.charts import bar_style, time_bars
from service.plots.style import LABELS, Figure, new_figure, style

__all__ = ["FAMILIES_SHOWN", "search_figure"]

FAMILIES_SHOWN = 12  # the largest discarded families drawn (the CLI's table shows as many)
_REASON_CHARS = 60
_MEMORY, _RULE = "#5A5A5A", "#B8B8B8"  # greys: a discarded family is not a kind of time


def _family(f: Mapping[str, Any]) -> str:
    return (f"DP {f['dp']} x TP {f['tp']} x PP {f['pp']}" + (f" x CP {f['cp']}" if f.get("cp") else "")
            + f", ZeRO {f['zero_stage']}, {f['recompute']}"
            + (", SP" if f.get("sequence_parallel") else ""))


def _named(entry: Mapping[str, Any]) -> str:
    """A ranked layout's summary (every parallel dimension: simcore's describe) and its precision, which the
    summary names only for the low-precision formats (fp8, mxfp8, nvfp4)."""
    layout = entry.get("layout") or {}
    precision = precision_name(layout.get("precision"), layout.get("fp8_recipe"), layout.get("fp8_scaling"))
    summary = str(entry["summary"])
    named = any(word in summary for word in ("fp8", "nvfp4"))
    return summary if named else f"{summary}, {precision}"


def _short(reason: str) -> str:
    """The reason up to its first clause break past 30 characters, and at most _REASON_CHARS characters."""
    cut = reason.find(", ", 30)
    if 0 < cut <= _REASON_CHARS:
        return reason[:cut]
    return reason if len(reason) <= _REASON_CHARS else reason[:_REASON_CHARS - 1] + "…"


def search_figure(result: Mapping[str, Any], *, title: str | None = None) -> Figure:
    """The search's top layouts (ranked, best first; the baseline last when there is one) and its discarded
    families (the most layouts first)."""
    entries = [(f"#{e['rank']} {_named(e)}", e) for e in result["top"]]
    if result.get("baseline"):
        entries.append((f"baseline {_named(result['baseline'])}", result["baseline"]))
    families = sorted(result.get("discarded_families", []), key=lambda f: -int(f["layouts"]))
    shown = families[:FAMILIES_SHOWN]
    top_in, bottom_in = 0.45 * max(len(entries), 1) + 0.9, (0.32 * len(shown) + 0.9) if shown else 0.0
    figure = new_figure(13.0, 1.2 + top_in + bottom_in)
    problem = result.get("problem", {})
    with style():
        axes = figure.subplots(2 if shown else 1, 1, height_ratios=[top_in, bottom_in] if shown else None,
                               squeeze=False)[:, 0]
        ax = axes[0]
        kinds: list[str] = []
        if entries:
            kinds = time_bars(ax, [label for label, _ in entries], [dict(e) for _, e in entries], "top-",
                              extra=lambda e: f", {float(e['tokens_per_s']):,.0f} tokens/s")
        else:
            ax.text(0.5, 0.5, "no layout could be simulated: every one was discarded", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_axis_off()
        ax.set_title(f"Fastest layouts, simulated ({result['search']['simulated']} of "
                     f"{result['search']['feasible']} feasible; {result['search']['pruned']} discarded before "
                     f"simulation)", fontsize=9, loc="left")
        if shown:
            ax = axes[1]
            for row, family in enumerate(shown):
                colour = _MEMORY if family["kind"] == "memory" else _RULE
                bar = ax.barh(row, int(family["layouts"]), height=0.6, color=colour, edgecolor="white")
                bar.patches[0].set_gid(f"discarded-{row}")
                reason = _short(str(family["reason"]))
                ax.text(int(family["layouts"]), row, f"  {reason}", va="center", fontsize=7)
            ax.set_yticks(range(len(shown)), [_family(f["family"]) for f in shown])
            ax.set_ylim(len(shown) - 0.5, -0.5)
            ax.set_xlim(0, max(int(f["layouts"]) for f in shown) * 2.4)  # room for the reasons after the bars
            ax.tick_params(axis="y", length=0)
            ax.spines["left"].set_visible(False)
            ax.set_xlabel("layouts in the family, discarded before simulation")
            more = f" ({len(families) - len(shown)} more not drawn)" if len(families) > len(shown) else ""
            ax.set_title(f"Largest discarded families and their first reason{more}", fontsize=9, loc="left")
        handles = [Patch(label=LABELS.get(k, k), **bar_style(k)) for k in kinds]
        if shown:
            handles += [Patch(facecolor=_MEMORY, label="discarded: does not fit"),
                        Patch(facecolor=_RULE, label="discarded: breaks a layout rule")]
        if handles:
            figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6))
        gpu = f"{gpu_label(str(problem['gpu']))} GPUs" if problem.get("gpu") else "GPUs"
        heading = title or (f"Layout search: {problem.get('model', 'model')} on {problem.get('num_gpus', '?')} "
                            f"{gpu}, global batch {problem.get('global_batch_size', '?')}")
        figure.suptitle(heading, fontsize=9.5)
    return figure
