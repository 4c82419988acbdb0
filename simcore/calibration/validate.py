"""`clustersim validate`: predicted against published iteration times for every row the simulator can express.

Rows come from the reference data shipped inside the package (simcore/calibration/reference/training-runs.json, a
copy of the project's reference set) or from `--reference FILE`. The cost model is fitted on the calibration rows
(Megatron 2020 and Megatron-Core 2024) and judged on the others (the Narayanan'21 table and the NeMo T5-3B
scaling rows); the means cover only rows that were not fitted.

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
- NeMo (NeMo-Framework-Launcher README, DGX A100, 2022-2023): what its predefined T5 configs
  (launcher_scripts/conf/training/t5/*.yaml of that time) set: standard attention (the fused masked softmax;
  those configs have no flash-attention switch, and the changelog's flash attention, 23.03, is for GPT), no
  recomputation (activations_checkpoint_num_layers 0; the rows say none), no sequence parallelism and no
  TP-communication overlap (the configs do not turn them on; the changelog lists sequence parallelism for GPT
  and BERT only), the distributed optimizer (apex distributed_fused_adam: optimizer state sharded, gradients
  reduce-scattered once per step in its fp32 state dtype, parameters all-gathered after the step: ZeRO 1
  timing) with overlap_grad_sync False (set in the yaml: the reduction waits for the end of backward), bf16.
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
from dataclasses import replace
from importlib import resources
from typing import Any

from simcore.calibration import modern
from simcore.cost.parameters import FITTED, CostParameters
from simcore.domain.layout import Layout, Precision, Recompute
from simcore.domain.model import model_from_fields
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
    "nemo": (False, "standard", "none", False, False, 1, "bf16"),
}

# Padded vocabulary of a tokenizer a row names instead of giving a number (see the module docstring).
TOKENIZER_VOCAB = {"BertWordPieceCase": 29184}
GATED_ACTIVATIONS = ("geglu", "swiglu", "reglu")


def load_reference(path: str | None = None, shipped: str = "training-runs.json") -> list[dict[str, Any]]:
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


def _source(case_id: str) -> str | None:
    prefix = case_id.split("-", 1)[0]
    return prefix if prefix in SOURCES else None


def scenario_for(case: dict[str, Any]) -> Scenario:
    """The request a row describes; raises ValueError (with the reason) when it cannot be expressed."""
    if modern.handles(case):  # FP8 and Blackwell rows (simcore/calibration/modern.py)
        return modern.scenario_for(case)
    source = _source(str(case.get("id", "")))
    if source is None:
        raise ValueError("no rule for this source's unstated settings")
    m, c, lay = case["model"], case["cluster"], case["layout"]
    if m.get("arch") not in ("gpt", "t5"):
        raise ValueError(f"architecture {m.get('arch')!r} is not simulated yet")
    if "global_batch" not in lay:
        raise ValueError("the global batch size is not published")
    if c["gpu"] not in NODE_BY_GPU:
        raise ValueError(f"GPU {c['gpu']} is not in the catalog")
    _calibration, attention, recompute, sp, overlap, zero, precision = SOURCES[source]
    model = model_from_fields(_model_fields(m, attention))
    node: ClusterSpec = NODE_PRESETS[NODE_BY_GPU[c["gpu"]]]
    cluster = sized(node, int(c["num_gpus"]))
    dp, tp, pp = int(lay["dp"]), int(lay["tp"]), int(lay["pp"])
    microbatch = int(lay.get("microbatch_size", 1))
    if source == "megatron20":
        microbatch = int(lay["global_batch"]) // dp
    if int(lay["global_batch"]) % (dp * microbatch):
        raise ValueError(f"the global batch ({lay['global_batch']}) is not a whole number of microbatches of "
                         f"dp x microbatch = {dp} x {microbatch} samples")
    layout = Layout(dp=dp, tp=tp, pp=pp, microbatch_size=microbatch, global_batch_size=int(lay["global_batch"]),
                    recompute=Recompute(lay.get("recompute", recompute)), sequence_parallel=sp and tp > 1,
                    tp_comm_overlap=sp and tp > 1, overlap_grad_reduce=overlap, zero_stage=zero,
                    precision=Precision(precision))
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


def _calibration(case: dict[str, Any]) -> bool:
    if modern.handles(case):
        return modern.is_calibration(case)
    return SOURCES[str(_source(case["id"]))][0]


def run_validation(path: str | None = None, params: CostParameters = FITTED) -> dict[str, Any]:
    """Every expressible row against its prediction. Without `path`, both shipped files (training-runs.json and
    the modern reference) are read, each case names its file and `by_reference` gives each file's means."""
    files = [(path, load_reference(path))] if path else [
        (name, load_reference(None, name)) for name in ("training-runs.json", modern.REFERENCE)]
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
            "calibration": _calibration(case),
            **({} if path else {"reference": name}),
        })
    report: dict[str, Any] = {"cases": cases, **_means(cases), "skipped": skipped}
    if not path:
        report["by_reference"] = {name: _means([c for c in cases if c["reference"] == name]) for name, _ in files}
    return report


def _means(cases: list[dict[str, Any]]) -> dict[str, float | None]:
    judged = [abs(c["error_pct"]) for c in cases if not c["calibration"]]
    return {"mean_abs_error_pct": sum(judged) / len(judged) if judged else None,
            "max_abs_error_pct": max(judged) if judged else None}


def render_table(report: dict[str, Any]) -> str:
    lines = [f"{'case':40s} {'measured s':>11s} {'predicted s':>12s} {'error %':>8s}  fitted"]
    for c in report["cases"]:
        lines.append(f"{c['id']:40s} {c['measured_s']:11.3f} {c['predicted_s']:12.3f} {c['error_pct']:+8.1f}  "
                     f"{'yes' if c['calibration'] else 'no'}")
    if report["mean_abs_error_pct"] is not None:
        lines.append(f"rows not fitted: mean |error| {report['mean_abs_error_pct']:.1f}%, "
                     f"max |error| {report['max_abs_error_pct']:.1f}%")
    for name, means in report.get("by_reference", {}).items():
        if means["mean_abs_error_pct"] is not None:
            lines.append(f"rows not fitted of {name}: mean |error| {means['mean_abs_error_pct']:.1f}%, "
                         f"max |error| {means['max_abs_error_pct']:.1f}%")
    for s in report["skipped"]:
        lines.append(f"skipped {s['id']}: {s['reason']}")
    return "\n".join(lines)
