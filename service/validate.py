"""`clustersim validate`: predicted against published iteration times for every row the simulator can express.

Rows come from the reference data shipped inside the package (service/reference/training-runs.json, a copy of
the project's reference set) or from `--reference FILE`. The cost model is fitted on the calibration rows
(Megatron 2020 and Megatron-Core 2024) and judged on the others (the Narayanan'21 table); the means cover only
rows that were not fitted.

What each source leaves unstated is filled in the same way for every row of that source, never per row:
- Narayanan'21 (Megatron-LM, 2021): full recomputation (their FLOP count assumes it), standard attention,
  1F1B, microbatch 1 (not published), no sequence parallelism (it came later), gradient reduction overlapped
  with backward as for the 2020 runs below (same code base and cluster).
- Megatron 2020 (tables.tex): full recomputation (the published TFLOP/s count it), standard attention,
  sequence 1024, the whole per-replica batch (16 on DGX A100, 8 on DGX-2) as one microbatch, gradient
  reduction overlapped with backward (the DP runs lose only 3-7% to 128-way data parallelism, which a
  non-overlapped fp32 all-reduce of 1-8 GB over InfiniBand could not do).
- Megatron-Core 2024: no recomputation, flash attention, sequence parallelism with TP and the TP collectives
  overlapped with GEMMs, distributed optimizer (ZeRO 1) with gradient reduction and parameter gathers
  overlapped (the README lists --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap), microbatch 1
  (not published).
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from typing import Any

from simcore.calibration import FITTED, CostParameters
from simcore.layout import Layout, Precision, Recompute
from simcore.model import model_from_fields
from simcore.simulate import Scenario, simulate
from topology.cluster_spec import NODE_PRESETS, ClusterSpec, sized
from topology.errors import SpecError

NODE_BY_GPU = {"a100-80gb": "dgx-a100", "a100-40gb": "dgx-a100-40gb", "h100-80gb": "dgx-h100",
               "h200-141gb": "dgx-h200", "v100-32gb": "dgx-2-v100"}

# Per source (the id's prefix): (calibration row?, attention, recompute, sequence parallel and TP overlap,
# overlap grad reduce, ZeRO stage, precision)
SOURCES = {
    "narayanan21": (False, "standard", "full", False, False, 0, "fp16"),
    "megatron20": (True, "standard", "full", False, False, 0, "fp16"),
    "mcore24": (True, "flash", "none", True, True, 1, "bf16"),
}


def load_reference(path: str | None = None) -> list[dict[str, Any]]:
    """The reference rows; a file that cannot be read or parsed is invalid input (SpecError on `--reference`)."""
    try:
        if path is None:
            text = resources.files("service").joinpath("reference/training-runs.json").read_text(encoding="utf-8")
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SpecError("--reference", f"cannot read {path}: {err}") from err
    cases = data.get("cases") if isinstance(data, dict) else data
    if not isinstance(cases, list):
        raise SpecError("--reference", "must be a JSON list of rows or an object with a 'cases' list")
    return cases


def _source(case_id: str) -> str | None:
    prefix = case_id.split("-", 1)[0]
    return prefix if prefix in SOURCES else None


def scenario_for(case: dict[str, Any]) -> Scenario:
    """The request a row describes; raises ValueError (with the reason) when it cannot be expressed."""
    source = _source(str(case.get("id", "")))
    if source is None:
        raise ValueError("no rule for this source's unstated settings")
    m, c, lay = case["model"], case["cluster"], case["layout"]
    if m.get("arch") != "gpt":
        raise ValueError(f"architecture {m.get('arch')!r} is not simulated yet")
    if "global_batch" not in lay:
        raise ValueError("the global batch size is not published")
    if c["gpu"] not in NODE_BY_GPU:
        raise ValueError(f"GPU {c['gpu']} is not in the catalog")
    _calibration, attention, recompute, sp, overlap, zero, precision = SOURCES[source]
    model = model_from_fields({
        "architecture": "decoder_only", "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "ffn_hidden_size": m.get("ffn", 4 * m["hidden"]),
        "vocab_size": m["vocab"], "seq_length": m["seq_len"], "attention": attention,
    })
    node: ClusterSpec = NODE_PRESETS[NODE_BY_GPU[c["gpu"]]]
    cluster = sized(node, int(c["num_gpus"]))
    dp, tp, pp = int(lay["dp"]), int(lay["tp"]), int(lay["pp"])
    microbatch = int(lay.get("microbatch_size", 1))
    if source == "megatron20":
        microbatch = int(lay["global_batch"]) // dp
    layout = Layout(dp=dp, tp=tp, pp=pp, microbatch_size=microbatch, global_batch_size=int(lay["global_batch"]),
                    recompute=Recompute(lay.get("recompute", recompute)), sequence_parallel=sp and tp > 1,
                    tp_comm_overlap=sp and tp > 1, overlap_grad_reduce=overlap, zero_stage=zero,
                    precision=Precision(precision))
    return Scenario(model, cluster, layout)


def measured_time(case: dict[str, Any]) -> float | None:
    for section in ("measured", "derived"):
        value = (case.get(section) or {}).get("iteration_time_s")
        if value is not None:
            return float(value)
    return None


def run_validation(path: str | None = None, params: CostParameters = FITTED) -> dict[str, Any]:
    cases, skipped = [], []
    for case in load_reference(path):
        if not isinstance(case, dict) or case.get("kind", "training") != "training":
            continue
        measured = measured_time(case)
        try:
            if measured is None:
                raise ValueError("no iteration time is published or derived")
            scenario = scenario_for(case)
            outcome = simulate(replace(scenario, cost_parameters=params))
        except (ValueError, SpecError) as err:
            skipped.append({"id": case.get("id", "?"), "reason": str(err)})
            continue
        except (KeyError, TypeError) as err:
            skipped.append({"id": case.get("id", "?"), "reason": f"malformed row: {err!r}"})
            continue
        predicted = outcome.metrics.iteration_time_s
        cases.append({
            "id": case["id"], "measured_s": measured, "predicted_s": predicted,
            "error_pct": 100.0 * (predicted - measured) / measured,
            "calibration": SOURCES[str(_source(case["id"]))][0],
        })
    judged = [abs(c["error_pct"]) for c in cases if not c["calibration"]]
    return {
        "cases": cases,
        "mean_abs_error_pct": sum(judged) / len(judged) if judged else None,
        "max_abs_error_pct": max(judged) if judged else None,
        "skipped": skipped,
    }


def render_table(report: dict[str, Any]) -> str:
    lines = [f"{'case':40s} {'measured s':>11s} {'predicted s':>12s} {'error %':>8s}  fitted"]
    for c in report["cases"]:
        lines.append(f"{c['id']:40s} {c['measured_s']:11.3f} {c['predicted_s']:12.3f} {c['error_pct']:+8.1f}  "
                     f"{'yes' if c['calibration'] else 'no'}")
    if report["mean_abs_error_pct"] is not None:
        lines.append(f"rows not fitted: mean |error| {report['mean_abs_error_pct']:.1f}%, "
                     f"max |error| {report['max_abs_error_pct']:.1f}%")
    for s in report["skipped"]:
        lines.append(f"skipped {s['id']}: {s['reason']}")
    return "\n".join(lines)
