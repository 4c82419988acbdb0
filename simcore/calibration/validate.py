"""`clustersim validate`: predicted against published iteration times for every row the simulator can express.

Rows come from the reference data shipped inside the package (simcore/calibration/reference/training-runs.json, a
copy of the project's reference set) or from `--reference FILE`. The cost model is fitted on the calibration rows
(Megatron 2020 and Megatron-Core 2024) and judged on the others (the Narayanan'21 table and the NeMo T5-3B
scaling rows); the means cover only rows that were not fitted.

What each source leaves unstated is filled in the same way for every row of that source, never per row; a field a
row gives itself (its `layout`'s zero_stage, recompute, microbatch_size, precision, overlap_grad_reduce) is taken
first, then what the source's own launch script set for that run, where it published one
(simcore/calibration/launch_scripts.py, matched by the run's shape), then the source's defaults. Which sources the
cost model was fitted on is data: simcore/cost/fitted.py (FITTED_SOURCES) names them, and every case carries
`calibration` accordingly.
- Narayanan'21 (Megatron-LM, 2021): full recomputation (their FLOP count assumes it), standard attention,
  no sequence parallelism (it came later), fp16. Table 1's rows take what the authors' launch scripts set per run
  (simcore/calibration/launch_scripts.py: Megatron-LM examples/sc21/run_table_1.sh): the microbatch, PyTorch's
  DDP (gradient all-reduce overlapped with the last microbatch's backward) for the runs without pipeline
  parallelism and Megatron's `local` DDP (the all-reduce once backward is over) for the pipelined ones, and the
  interleaved schedule where the script gives layers per virtual stage; without a script entry: 1F1B,
  microbatch 1 and the `local` DDP. The two ZeRO-3 baseline rows (Table 2) give their own zero_stage; the paper's
  ZeRO-3 is DeepSpeed's of the time: `zero_implementation: deepspeed_2021` (simcore/cost/sharding.py). Its host time
  per op of a list-based collective (HOST_OP_2021_S) is fitted on these two rows, which are therefore marked as
  calibration rows.
- Megatron 2020 (tables.tex): full recomputation (the published TFLOP/s count it), standard attention,
  sequence 1024, the whole per-replica batch (16 on DGX A100, 8 on DGX-2) as one microbatch (Megatron-LM of
  2020 had no gradient accumulation), fp16, and the gradient all-reduce after backward (its `local` DDP).
- Megatron-Core 2024: no recomputation, flash attention, sequence parallelism with TP and the TP collectives
  overlapped with GEMMs, distributed optimizer (ZeRO 1) with gradient reduction and parameter gathers
  overlapped (the README lists --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap), microbatch 1
  (not published).
- NeMo (NeMo-Framework-Launcher README, DGX A100, 2022-2023): what its predefined T5 configs
  (launcher_scripts/conf/training/t5/*.yaml of that time) set: standard attention (the fused masked softmax;
  those configs have no flash-attention switch, and the changelog's flash attention, 23.03, is for GPT), no
  recomputation (activations_checkpoint_num_layers 0; the rows say none), no sequence parallelism and no
  TP-communication overlap (the configs do not turn them on; the changelog lists sequence parallelism for GPT
  and BERT only), the distributed optimizer (apex distributed_fused_adam: optimizer state sharded, gradients
  reduce-scattered once per step in its fp32 state dtype, parameters all-gathered after the step: ZeRO 1
  timing) with overlap_grad_sync False (set in the yaml: the reduction waits for the end of backward), bf16,
  and apex's asynchronous input-gradient all-reduce of the column-parallel projections, which NeMo turns on
  whenever TP > 1 without sequence parallelism (simcore/cost/tp_async.py; Megatron-Core's rows have it too, under
  their TP-communication overlap). Megatron 2020 and Narayanan'21 predate it (Megatron-LM, September 2021).
  T5 rows: encoder and decoder share the word embedding and the output layer reuses it (share_token_embeddings,
  share_decoder_tokens_head_embeddings); the vocabulary, published only as "~29k BertWordPieceCase", is that
  tokenizer's 28,996 word pieces plus the 100 sentinel tokens, padded to a multiple of 128 x TP: 29,184; the
  table's `layers` (48) is encoder + decoder. Caveat: the scaling chart is named 3B_T5_throughput_2208 and the
  changelog brings distributed Adam to T5 only in 22.11, so the table may predate the optimizer the rows name;
  the rows are taken as written.

Rows that publish tokens/s instead of an iteration time get one as global batch x tokens per sample / tokens/s
(a row without a global batch is skipped). For T5, "tokens" is read as the encoder's input tokens (`seq_len`, 512
a sample), not encoder + target (640). The source does not define it, but its own figures count that way: the T5
accuracy table gives "Seq Length 512" and "#Tokens 1T" for configs whose max_steps x global batch is 2.048e9
samples (3B: 1,066,667 x 1920; 220M: 1,000,000 x 2048), and 2.048e9 x 512 = 1.05e12 (x 640 would be 1.3e12);
the launcher's throughput script (auto_configurator/autoconfig/scripts/compare_throughput.py) reports samples
per second and takes the encoder's seq_length as a T5 run's "Seq Length". Searches of the stored code, docs and
issues (NeMo T5 tokens per second, consumed samples, encoder sequence length) found no NeMo code that logs a T5
tokens/s or says otherwise. The other reading would make every measured time 25% longer. Errors are of
iteration times either way, never of tokens/s (a result's tokens_per_s counts encoder + target tokens).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from simcore.calibration import launch_scripts, modern, sharded_rows, zero_bubble
from simcore.cost.parameters import FITTED, FITTED_SOURCES, CostParameters
from simcore.cost.sharding import FITTED_ROWS
from simcore.domain.layout import Layout, Precision, Recompute, Schedule, ZeroImplementation
from simcore.domain.model import model_from_fields
from simcore.simulate import Scenario, simulate
from topology.cluster_spec import NODE_PRESETS, ClusterSpec, sized
from topology.errors import SpecError

NODE_BY_GPU = {"a100-80gb": "dgx-a100", "a100-40gb": "dgx-a100-40gb", "h100-80gb": "dgx-h100",
               "h200-141gb": "dgx-h200", "v100-32gb": "dgx-2-v100"}
DEFAULT_REFERENCE = "training-runs.json"


@dataclass(frozen=True, slots=True)
class SourceDefaults:
    """What a source leaves unstated (the module docstring gives the reasons)."""

    attention: str
    recompute: str
    sequence_parallel: bool  # with TP, and the TP collectives overlapped with GEMMs
    overlap_grad_reduce: bool
    zero_stage: int
    precision: str
    whole_batch_microbatch: bool = False  # one microbatch of the whole per-replica batch (no accumulation)
    zero3: ZeroImplementation = ZeroImplementation.MEGATRON  # whose ZeRO 3 the source's ZeRO 3 rows ran
    async_tp: bool = False  # column-parallel input-gradient collectives under the weight gradients (tp_async.py)


# Per source (the id's prefix).
SOURCES = {
    "narayanan21": SourceDefaults("standard", "full", False, False, 0, "fp16",
                                  zero3=ZeroImplementation.DEEPSPEED_2021),
    "megatron20": SourceDefaults("standard", "full", False, False, 0, "fp16", whole_batch_microbatch=True),
    "mcore24": SourceDefaults("flash", "none", True, True, 1, "bf16", async_tp=True),
    "nemo": SourceDefaults("standard", "none", False, False, 1, "bf16", async_tp=True),
}

# Padded vocabulary of a tokenizer a row names instead of giving a number (see the module docstring).
TOKENIZER_VOCAB = {"BertWordPieceCase": 29184}
GATED_ACTIVATIONS = ("geglu", "swiglu", "reglu")


def load_reference(path: str | None = None, shipped: str = DEFAULT_REFERENCE) -> list[dict[str, Any]]:
    """The reference rows (of the shipped file `shipped` when no path is given); a file that cannot be read or
    parsed is invalid input (SpecError on `--reference`)."""
    try:
        if path is None:
            source = resources.files("simcore.calibration").joinpath(f"reference/{shipped}")
            text = source.read_text(encoding="utf-8")
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


def source_of(case_id: str) -> str | None:
    """The source a row comes from: its id's prefix, if clustersim knows that source's unstated settings."""
    prefix = case_id.split("-", 1)[0]
    return prefix if prefix in SOURCES else None


def group_of(case_id: str) -> str:
    """The source group a row is reported in: the first two parts of its id, its source and the table, model
    family or system the source's rows are grouped by (`narayanan21-t1`, `megatron20-dgx2v100`, `nemo-t5`)."""
    return "-".join(case_id.split("-")[:2])


def is_fitted(case_id: str) -> bool:
    return source_of(case_id) in FITTED_SOURCES


def scenario_for(case: dict[str, Any]) -> Scenario:
    """The request a row describes; raises ValueError (with the reason) when it cannot be expressed."""
    if modern.handles(case):  # FP8 and Blackwell rows (simcore/calibration/modern.py)
        return modern.scenario_for(case)
    if zero_bubble.handles(case):  # the Zero Bubble paper's 1F1B rows (simcore/calibration/zero_bubble.py)
        return zero_bubble.scenario_for(case)
    if sharded_rows.handles(case):  # FSDP and DeepSpeed ZeRO 3 rows (simcore/calibration/sharded_rows.py)
        return sharded_rows.scenario_for(case)
    source = source_of(str(case.get("id", "")))
    if source is None:
        raise ValueError("no rule for this source's unstated settings")
    m, c, lay = case["model"], case["cluster"], case["layout"]
    if m.get("arch") not in ("gpt", "t5"):
        raise ValueError(f"architecture {m.get('arch')!r} is not simulated yet")
    if "global_batch" not in lay:
        raise ValueError("the global batch size is not published")
    if c["gpu"] not in NODE_BY_GPU:
        raise ValueError(f"GPU {c['gpu']} is not in the catalog")
    defaults = SOURCES[source]
    script = launch_scripts.settings_for(source, m, lay)
    model = model_from_fields(_model_fields(m, defaults.attention))
    node: ClusterSpec = NODE_PRESETS[NODE_BY_GPU[c["gpu"]]]
    cluster = sized(node, int(c["num_gpus"]))
    dp, tp, pp = int(lay["dp"]), int(lay["tp"]), int(lay["pp"])
    global_batch = int(lay["global_batch"])
    # The row's own fields first, then its run's launch script, then the source's defaults.
    if script is not None:
        default_microbatch = script.microbatch_size
    else:
        default_microbatch = global_batch // dp if defaults.whole_batch_microbatch else 1
    microbatch = int(lay.get("microbatch_size", default_microbatch))
    if global_batch % (dp * microbatch):
        raise ValueError(f"the global batch ({global_batch}) is not a whole number of microbatches of "
                         f"dp x microbatch = {dp} x {microbatch} samples")
    precision = lay.get("precision")
    if precision not in tuple(Precision):
        precision = defaults.precision  # absent, or a description such as "fp16/bf16 mixed"
    sp = defaults.sequence_parallel and tp > 1
    zero = int(lay.get("zero_stage", defaults.zero_stage))
    overlap = script.overlap_grad_reduce if script is not None else defaults.overlap_grad_reduce
    schedule, chunks = Schedule.ONE_F_ONE_B, 1
    if script is not None and script.layers_per_virtual_stage is not None:
        schedule, chunks = Schedule.INTERLEAVED_1F1B, int(m["layers"]) // pp // script.layers_per_virtual_stage
    layout = Layout(dp=dp, tp=tp, pp=pp, microbatch_size=microbatch, global_batch_size=global_batch,
                    virtual_stages=chunks, schedule=schedule,
                    recompute=Recompute(lay.get("recompute", defaults.recompute)), sequence_parallel=sp,
                    tp_comm_overlap=sp, overlap_grad_reduce=bool(lay.get("overlap_grad_reduce", overlap)),
                    async_tensor_model_parallel_allreduce=defaults.async_tp,
                    zero_stage=zero, precision=Precision(precision),
                    zero_implementation=defaults.zero3 if zero == 3 else ZeroImplementation.MEGATRON)
    return Scenario(model, cluster, layout)


def _vocab(m: dict[str, Any]) -> int:
    """The row's vocabulary: its number, or the padded size of the tokenizer it names."""
    vocab = m["vocab"]
    if isinstance(vocab, int):
        return vocab
    for tokenizer, size in TOKENIZER_VOCAB.items():
        if tokenizer in str(vocab):
            return size
    raise ValueError(f"vocabulary {vocab!r} is not a number nor a known tokenizer")


def _model_fields(m: dict[str, Any], attention: str) -> dict[str, Any]:
    """Contract model fields for a row's model: GPT (decoder only) or T5 (encoder-decoder, shared embedding)."""
    common = {"hidden_size": m["hidden"], "num_attention_heads": m["heads"],
              "ffn_hidden_size": m.get("ffn", 4 * m["hidden"]), "vocab_size": _vocab(m),
              "seq_length": m["seq_len"], "attention": attention}
    if m["arch"] == "gpt":
        return {"architecture": "decoder_only", "num_layers": m["layers"], **common}
    return {"architecture": "encoder_decoder", "encoder_layers": m["encoder_layers"],
            "decoder_layers": m["decoder_layers"], "decoder_seq_length": m["dec_seq_len"],
            "head_dim": m.get("d_kv"), "gated_mlp": m.get("ffn_act") in GATED_ACTIVATIONS,
            "tied_embeddings": True, **common}


def tokens_per_sample(case: dict[str, Any]) -> int:
    """What one sample counts for in a row's published tokens/s: its `seq_len` (for T5 the encoder's input
    tokens only; the module docstring says why)."""
    return int(case["model"]["seq_len"])


def measured_time(case: dict[str, Any]) -> float | None:
    """The row's iteration time: published or derived, else from its tokens/s and global batch; None if none."""
    if sharded_rows.handles(case):  # tokens/s per GPU or TFLOP/s per GPU (simcore/calibration/sharded_rows.py)
        return sharded_rows.measured_time(case)
    for section in ("measured", "derived"):
        value = (case.get(section) or {}).get("iteration_time_s")
        if value is not None:
            return float(value)
    tokens_per_s = (case.get("measured") or {}).get("tokens_per_s")
    global_batch = (case.get("layout") or {}).get("global_batch")
    if tokens_per_s and global_batch:
        return float(global_batch) * tokens_per_sample(case) / float(tokens_per_s)
    return None


def _no_time_reason(case: dict[str, Any]) -> str:
    if (case.get("measured") or {}).get("tokens_per_s"):
        return "only tokens/s is published, and without the global batch size no iteration time follows from it"
    return "no iteration time is published or derived"


def is_calibration_case(case: dict[str, Any]) -> bool:
    """Whether a row was fitted on: its source's, or one of the rows a constant was fitted on."""
    if modern.handles(case):
        return modern.is_calibration(case)
    return is_fitted(str(case["id"])) or str(case["id"]) in FITTED_ROWS


def run_validation(path: str | None = None, params: CostParameters = FITTED) -> dict[str, Any]:
    """Every expressible row against its prediction: the contract's keys, plus per case its `reference` file and
    source `group`, the `fitted_sources`, and the errors summarised `by_reference`, `by_source` and `by_group`
    (see `summarise`). Without `path`, the shipped files are read (training-runs.json, the modern reference,
    simcore/calibration/modern.py, and the sharded data-parallel one, simcore/calibration/sharded_rows.py)."""
    files = [(os.path.basename(path), load_reference(path))] if path else [
        (name, load_reference(None, name)) for name in (DEFAULT_REFERENCE, modern.REFERENCE, sharded_rows.REFERENCE)]
    cases, skipped = [], []
    for name, case in ((name, case) for name, rows in files for case in rows):
        if not isinstance(case, dict) or case.get("kind", "training") != "training":
            continue
        try:
            measured = measured_time(case)
            if measured is None:
                raise ValueError(_no_time_reason(case))
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
            "calibration": is_calibration_case(case),
            "reference": name, "source": str(case["id"]).split("-", 1)[0], "group": group_of(str(case["id"])),
        })
    return {"cases": cases, **_means(cases), "skipped": skipped, "fitted_sources": list(FITTED_SOURCES),
            "fitted_rows": {"HOST_OP_2021_S": list(FITTED_ROWS)},
            "by_reference": summarise(cases, "reference"), "by_source": summarise(cases, "source"),
            "by_group": summarise(cases, "group")}


def _means(cases: list[dict[str, Any]]) -> dict[str, float | None]:
    judged = [abs(c["error_pct"]) for c in cases if not c["calibration"]]
    return {"mean_abs_error_pct": sum(judged) / len(judged) if judged else None,
            "max_abs_error_pct": max(judged) if judged else None}


def summarise(cases: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per value of `key` (a case's reference file or source group): rows, mean and max |error| %, over the rows
    fitted, the rows not fitted and all of them (None where there are none)."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(str(c[key]) for c in cases):
        mine = [c for c in cases if c[key] == name]
        out[name] = {part: _stats([abs(c["error_pct"]) for c in mine if keep(c)])
                     for part, keep in (("fitted", lambda c: c["calibration"]),
                                        ("not_fitted", lambda c: not c["calibration"]),
                                        ("all", lambda c: True))}
    return out


def _stats(errors: list[float]) -> dict[str, Any]:
    return {"rows": len(errors), "mean_abs_error_pct": sum(errors) / len(errors) if errors else None,
            "max_abs_error_pct": max(errors) if errors else None}


def render_table(report: dict[str, Any]) -> str:
    lines = [f"{'case':40s} {'measured s':>11s} {'predicted s':>12s} {'error %':>8s}  fitted"]
    for c in report["cases"]:
        lines.append(f"{c['id']:40s} {c['measured_s']:11.3f} {c['predicted_s']:12.3f} {c['error_pct']:+8.1f}  "
                     f"{'yes' if c['calibration'] else 'no'}")
    if report["mean_abs_error_pct"] is not None:
        lines.append(f"rows not fitted: mean |error| {report['mean_abs_error_pct']:.1f}%, "
                     f"max |error| {report['max_abs_error_pct']:.1f}%")
    lines.append(f"fitted on the sources: {', '.join(report['fitted_sources'])}")
    for constant, rows in report.get("fitted_rows", {}).items():
        lines.append(f"fitted on the rows {', '.join(rows)}: {constant}")
    lines.append(f"{'reference file or source group':40s} {'fitted: rows mean max':>24s} "
                 f"{'not fitted: rows mean max':>28s}")
    for summary in (report["by_reference"], report["by_source"], report["by_group"]):
        for name, parts in summary.items():
            lines.append(f"{name:40s} {_cell(parts['fitted']):>24s} {_cell(parts['not_fitted']):>28s}")
    for s in report["skipped"]:
        lines.append(f"skipped {s['id']}: {s['reason']}")
    return "\n".join(lines)


def _cell(stats: dict[str, Any]) -> str:
    if not stats["rows"]:
        return "-"
    return f"{stats['rows']} {stats['mean_abs_error_pct']:.1f}% {stats['max_abs_error_pct']:.1f}%"
