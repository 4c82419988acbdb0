"""Write simcore/calibration/reference/mlperf-results.json: NVIDIA's closed-division MLPerf Training LLM runs
(gpt3, llama31_8b, llama31_405b, llama2_70b_lora; v3.1-v5.1), read from local snapshots of the
mlcommons/training_results_v<version> repositories (git directories, read with `git ls-tree` / `git show`).

Per run (a system directory NVIDIA/results/<system>/<benchmark>/):
- the score as MLCommons' result summarizer computes it (mlcommons/logging mlperf_logging/result_summarizer/
  result_summarizer.py): minutes from `run_start` to `run_stop` of every result_*.txt whose run_stop status is
  success, the fastest and slowest dropped (one of them already when a run did not converge), the rest averaged, times
  the scaling factor of the directory's scaling.json (1 without one);
- the step time: the median over every run of the logged per-step times (`train_step_time`,
  `train_step_timing`, `train_step_timing in s`, or global batch / `throughput` in samples/s where only that is
  logged), none where the logs give none;
- the layout from the submission's config script: the one its README-<system>.md names, else (v3.1) the only
  config_<GPU>_<nodes>x*.sh of the benchmark for the system's node count; its variables evaluated as the script
  sets them (bench/shell_config.py: following `source`, taking `if` blocks by their conditions where simple), and
  what it leaves unset from the defaults of the implementation's Hydra configs (`${oc.env:VAR,default}`); the
  global batch is the logged one;
- the system's GPU, nodes and GPUs per node from NVIDIA/systems/<system>.json, and on NVL72 systems the GPUs of
  the run in one rack's NVLink domain (the run's GPUs over the racks the system's name counts);
- the FP8 scaling (the Hydra fp8_recipe, FP8_RECIPE: tensorwise is current scaling, else delayed),
  the parameter all-gather in FP8 (FP8_PARAM_GATHER / FP8_PARAMS through the Hydra configs), attention in FP8
  (fp8_dot_product_attention: FP8_DPA, unless NVTE_DPA_FP8_RECIPE="F16", or, with context parallelism, unless the
  implementation's Dockerfile builds a Transformer Engine before v1.10, which runs CP attention in 16 bits), the
  context-parallel exchange (cp_comm_type, CP_COMM_TYPE; Megatron-Core's p2p where unset), the GEMM weights built
  as FP8 tensors
  (NeMo 1's fp8_params, or te.fp8_model_init called in the implementation's Python), and the gradient
  reduction in bf16 (the implementation's pretrain.py `grad_reduce_in_fp32=False`, or its conf/optim
  `grad_sync_dtype: bf16`), and Megatron-Core's gradient bucket (Hydra `model.optim.bucket_size`, BUCKET_SIZE, where
  the pretrain.py passes it to DistributedDataParallelConfig: NeMo 2's pretraining).

Run:  python bench/mlperf_results.py [--mirror DIR] [--check]
      --mirror: where the snapshots are (git directories DIR/mlcommons+training_results_v<version>/repo; default
      $CLUSTERSIM_MLPERF_MIRROR, else .mirror beside the repository's directory); --check: write nothing, exit 1
      if the shipped file differs from what the snapshots give. Without any snapshot it says so and exits 0,
      writing nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

if __spec__ is None:  # run as python bench/X.py, not python -m bench.X: the repository root first, as -m does
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import shell_config

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "simcore" / "calibration" / "reference" / "mlperf-results.json"
VERSIONS = ("3.1", "4.0", "4.1", "5.0", "5.1")
BENCHMARKS = ("gpt3", "llama31_8b", "llama31_405b", "llama2_70b_lora")
# accelerator_model_name (systems/*.json) -> the GPU word of NVIDIA's config names and clustersim's cluster preset
GPUS = (("GB300", "GB300", "gb300-nvl72"), ("GB200", "GB200", "gb200-nvl72"), ("B200", "DGXB200", "dgx-b200"),
        ("H200", "DGXH200", "dgx-h200"), ("H100", "DGXH100", "dgx-h100"), ("L40S", "L40S", "l40s-pcie"))
# Hydra keys of the implementations' configs read for the layout
YAML_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
             "virtual_pipeline_model_parallel_size", "micro_batch_size", "sequence_parallel",
             "activations_checkpoint_granularity", "activations_checkpoint_num_layers", "fp8", "fp4",
             "fp8_params", "fp8_param_gather", "fp8_dot_product_attention", "cp_comm_type",
             "disable_parameter_transpose_cache", "bucket_size", "fp8_recipe")
# The Hydra fp8_recipe of an FP8 run -> its tensorwise scaling (another recipe is a KeyError: not mapped yet)
FP8_SCALING = {"tensorwise": "current", "delayed": "delayed", "": "delayed", "null": "delayed"}
# "(8x NVIDIA GB200 NVL72)" in a system's name: the NVLink racks the system has (systems/*.json system_name)
RACKS = re.compile(r"(\d+)x NVIDIA GB\d+ NVL72")
STEP_KEYS = ("train_step_time", "train_step_timing", "train_step_timing in s")
# cp_comm_type (Megatron-Core's TransformerConfig, Transformer Engine's attention) -> the request's layout.cp_comm
CP_COMM = {"p2p": "p2p", "a2a": "a2a", "all_gather": "all_gather", "allgather": "all_gather"}
# Transformer Engine runs FP8 attention under context parallelism from v1.10 (attn_forward_func_with_cp takes
# fp8 and fp8_meta from TransformerEngine v1.10 transformer_engine/pytorch/attention.py on); before, FusedAttention's
# context-parallel branch calls it without them (v1.6rc2 attention.py line 2820, `if context_parallel:`), so the
# attention of a CP run is 16-bit whatever fp8_dpa says.
TE_FP8_CONTEXT_PARALLEL = (1, 10)


class Repo:
    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name
        self.commit = self._git("rev-parse", "HEAD").strip()
        self.files = self._git("ls-tree", "-r", "--name-only", "HEAD", "NVIDIA").split("\n")

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True,
                              text=True).stdout

    def show(self, path: str) -> str:
        return self._git("show", f"HEAD:{path}")

    def source(self, path: str) -> str:
        return f"{self.name} @{self.commit[:12]} {path}"


def shell_env(repo: Repo, path: str) -> dict[str, str]:
    """The variables a config script sets (bench/shell_config.py: assignments in order, `source`d files followed,
    `if` blocks by their conditions where simple, else skipped)."""
    def include(script: str, name: str) -> str | None:
        # beside the script, else in its implementation's configs/ (v4.1's per-system copies)
        here = script.rsplit("/", 1)[0]
        return next((p for p in (f"{here}/{name}", f"{here}/configs/{name}") if p in repo.files), None)
    return shell_config.shell_env(lambda p: repo.show(p) if p in repo.files else None, path, include=include)


def yaml_defaults(repo: Repo, impl: str, env: dict[str, str]) -> dict[str, str]:
    """Per key of YAML_KEYS, its value in the implementation's Hydra configs with the script's variables."""
    found: dict[str, str] = {}
    for path in sorted(p for p in repo.files if p.startswith(impl + "/") and p.endswith(".yaml")
                       and "/tp_overlap/" not in p and "/nccl/" not in p):
        for key, value in re.findall(r"^\s+(\w+):\s*(.+?)\s*(?:#.*)?$", repo.show(path), re.M):
            if key in YAML_KEYS and key not in found:
                found[key] = _resolve_hydra(value, env)
    return found


def _resolve_hydra(value: str, env: dict[str, str]) -> str:
    m = re.search(r"oc\.env:(\w+)(?:,([^}]*))?\}", value)
    if m is None:
        return value
    return env.get(m[1], m[2] if m[2] is not None else "null")


def _int(value: Any, default: int | None) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return default


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def te_version(repo: Repo, impl: str) -> tuple[int, int] | None:
    """The Transformer Engine release the implementation's Dockerfile checks out (`ARG TE_REVISION=v1.6rc2`), or
    None: none named (SKIP: the base container's, or no Dockerfile)."""
    path = f"{impl}/Dockerfile"
    m = re.search(r"^ARG\s+TE_REVISION=v?(\d+)\.(\d+)", repo.show(path), re.M) if path in repo.files else None
    return (int(m[1]), int(m[2])) if m else None


def parse_log(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"steps": []}
    for line in text.split("\n"):
        if not line.startswith(":::MLLOG "):
            continue
        try:
            rec = json.loads(line[len(":::MLLOG "):])
        except json.JSONDecodeError:
            continue
        key, value, meta = rec.get("key"), rec.get("value"), rec.get("metadata") or {}
        if key == "run_start":
            out["start"] = rec["time_ms"]
        elif key == "run_stop":
            out["stop"], out["status"] = rec["time_ms"], meta.get("status")
            out["samples"] = meta.get("samples_count")
        elif key in ("global_batch_size", "submission_platform") and key not in out:
            out[key] = value
        elif key == "tracked_stats" and isinstance(value, dict):
            for name in STEP_KEYS:
                if name in value:
                    out["steps"].append(float(value[name]))
            if "throughput" in value:
                out.setdefault("throughput", []).append(float(value["throughput"]))
    return out


def score(minutes: list[float], dropped: int, scaling: float) -> float | None:
    """result_summarizer's olympic average (one dropped each side, a non-converged run counting as the slowest)."""
    kept = sorted(minutes)[1:len(minutes) - (1 - dropped)] if dropped <= 1 else []
    return sum(kept) / len(kept) * scaling if kept else None


def config_for(repo: Repo, bench: str, system: str, gpu_word: str, nodes: int) -> str | None:
    readme = f"NVIDIA/benchmarks/{bench}/implementations/{system}/README-{system}.md"
    if readme in repo.files:
        m = re.search(r"(benchmarks/\S+?/config_[\w.]+\.sh)", repo.show(readme))
        if m and f"NVIDIA/{m[1]}" in repo.files:
            return f"NVIDIA/{m[1]}"
    pattern = re.compile(rf"NVIDIA/benchmarks/{bench}/implementations/[^/]+/config_{gpu_word}_{nodes}x\d+x[^/]*\.sh$")
    found = [p for p in repo.files if pattern.match(p)]
    return found[0] if len(found) == 1 else None


def run_row(repo: Repo, version: str, bench: str, system: str) -> dict[str, Any] | str:
    """One row, or the reason there is none."""
    desc = json.loads(repo.show(f"NVIDIA/systems/{system}.json"))
    accel = str(desc["accelerator_model_name"])
    match = next((g for g in GPUS if g[0] in accel.upper()), None)
    if match is None:
        return f"GPU {accel!r} has no cluster preset"
    nodes, per_node = int(desc["number_of_nodes"]), int(desc["accelerators_per_node"])
    config = config_for(repo, bench, system, match[1], nodes)
    if config is None:
        return "no config script names this system"
    env = shell_env(repo, config)
    impl = config.rsplit("/", 1)[0]
    hydra = yaml_defaults(repo, impl, env)
    folder = f"NVIDIA/results/{system}/{bench}"
    logs = [parse_log(repo.show(p)) for p in repo.files
            if p.startswith(folder + "/result_") and p.endswith(".txt")]
    converged = [lg for lg in logs if lg.get("status") == "success" and "start" in lg]
    scaling_path = f"{folder}/scaling.json"
    scaling = float(json.loads(repo.show(scaling_path))["scaling_factor"]) if scaling_path in repo.files else 1.0
    minutes = [(lg["stop"] - lg["start"]) / 60000 for lg in converged]
    published = score(minutes, len(logs) - len(converged), scaling)
    if published is None:
        return "too few converged runs for a score"
    gbs = int(converged[0]["global_batch_size"])
    samples = [int(lg["samples"]) for lg in converged if lg.get("samples")]
    steps = [s for lg in converged for s in lg["steps"]]
    throughput = [t for lg in converged for t in lg.get("throughput", [])]
    step_time, step_from = None, None
    if steps:
        step_time, step_from = statistics.median(steps), "median of the logged train_step_time(s)"
    elif throughput:
        step_time, step_from = gbs / statistics.median(throughput), "global batch / median logged throughput"
    tp = _int(hydra.get("tensor_model_parallel_size"), 1) or 1
    pp = _int(hydra.get("pipeline_model_parallel_size"), 1) or 1
    cp = _int(hydra.get("context_parallel_size"), 1) or 1
    vp = _int(env.get("INTERLEAVED_PIPELINE", hydra.get("virtual_pipeline_model_parallel_size")), None)
    gpus = nodes * per_node
    precision = "NVFP4" if _true(env.get("FP4", hydra.get("fp4"))) else (
        "FP8" if _true(env.get("FP8", hydra.get("fp8"))) else "BF16")
    recompute = hydra.get("activations_checkpoint_granularity")
    racks = RACKS.search(str(desc.get("system_name", "")))
    cp_comm = hydra.get("cp_comm_type", "").strip("'\"")
    te = te_version(repo, impl)
    # FP8 attention as the run had it: the config's FP8_DPA, unless NVTE_DPA_FP8_RECIPE sends it to F16 or the
    # run's Transformer Engine predates FP8 under context parallelism
    fp8_dpa = (precision != "BF16" and _true(hydra.get("fp8_dot_product_attention"))
               and env.get("NVTE_DPA_FP8_RECIPE") != "F16"
               and not (cp > 1 and te is not None and te < TE_FP8_CONTEXT_PARALLEL))
    pretrain = f"{impl}/pretrain.py"
    # Gradients reduced in bf16: NeMo 2's pretrain.py builds DistributedDataParallelConfig(grad_reduce_in_fp32=False);
    # NeMo 1's Apex distributed Adam takes optim.grad_sync_dtype.
    bf16_grads = any(re.search(r"^grad_sync_dtype:\s*bf16\b", repo.show(p), re.M) for p in repo.files
                     if p.startswith(f"{impl}/conf/optim/") and p.endswith(".yaml")) or (
        pretrain in repo.files and re.search(r"grad_reduce_in_fp32\s*=\s*False", repo.show(pretrain)) is not None)
    # Megatron-Core's gradient bucket: the Hydra model.optim.bucket_size (BUCKET_SIZE), where the implementation's
    # pretrain.py hands it to DistributedDataParallelConfig (NeMo 2); NeMo 1's Apex optimizer buckets otherwise
    ddp_bucket = pretrain in repo.files and re.search(r"DistributedDataParallelConfig\([^)]*\bbucket_size=",
                                                      repo.show(pretrain)) is not None
    return {
        "id": f"v{version}-{bench}-{system.split('_ngc')[0]}", "benchmark": bench, "version": version,
        "system": system, "system_name": desc.get("system_name"), "accelerator": accel, "cluster_preset": match[2],
        "num_gpus": gpus, "num_nodes": nodes, "gpus_per_node": per_node,
        # GPUs of the job in one NVLink domain: spread evenly over the system's NVL72 racks (None: the node)
        "nvlink_domain_gpus": gpus // int(racks[1]) if racks else None,
        "layout": {"tp": tp, "pp": pp, "cp": cp, "dp": gpus // (tp * pp * cp),
                   "virtual_pipeline": vp if pp > 1 and vp not in (None, 0, 1) else None,
                   "microbatch": _int(hydra.get("micro_batch_size"), 1), "global_batch": gbs,
                   "precision": precision, "sequence_parallel": tp > 1 and _true(hydra.get("sequence_parallel")),
                   "recompute": None if recompute in (None, "null") else recompute,
                   "tp_comm_overlap": _true(env.get("TP_COMM_OVERLAP")),
                   # the distributed optimizer's parameter all-gather in FP8 (FP8_PARAMS before v5.0's NeMo 2)
                   "fp8_param_gather": _true(hydra.get("fp8_param_gather", hydra.get("fp8_params"))),
                   "grad_reduce_dtype": "bf16" if bf16_grads else None,
                   # Megatron-Core's DistributedDataParallelConfig.bucket_size (elements; None: not set through it)
                   "grad_bucket_elements": _int(hydra.get("bucket_size"), None) if ddp_bucket else None,
                   # attention in FP8: fp8_dot_product_attention (FP8_DPA), unless NVTE_DPA_FP8_RECIPE sends it to F16
                   # or the Dockerfile's Transformer Engine runs CP attention in 16 bits (TE_FP8_CONTEXT_PARALLEL)
                   "fp8_attention": fp8_dpa,
                   # where the tensorwise FP8 scales come from: the Hydra fp8_recipe (FP8_RECIPE) tensorwise is
                   # Megatron-Core's Float8CurrentScaling, delayed (the default, and NeMo 1's only one) DelayedScaling
                   "fp8_scaling": None if precision != "FP8" else FP8_SCALING[hydra.get("fp8_recipe", "").strip("'\"")],
                   # context parallelism's exchange: the config's cp_comm_type (Megatron-Core's default p2p)
                   "cp_comm": CP_COMM.get(cp_comm, cp_comm) if cp > 1 and cp_comm not in ("", "null") else
                   ("p2p" if cp > 1 else None),
                   # GEMM weights built as FP8 tensors: NeMo 1's fp8_params, or te.fp8_model_init in the implementation
                   "fp8_params": precision == "FP8" and (_true(hydra.get("fp8_params")) or any(
                       "fp8_model_init(" in repo.show(p) for p in repo.files
                       if p.startswith(impl + "/") and p.endswith(".py"))),
                   # Megatron-Core's disable_parameter_transpose_cache (NeMo 1's Hydra configs): TE keeps no FP8
                   # weight across microbatches (simcore/cost/compute/weight_cache.py)
                   "fp8_weight_cache": not (precision != "BF16"
                                            and _true(hydra.get("disable_parameter_transpose_cache"))),
                   # NeMo's ASYM_PP_EMBED / ASYM_PP_LOSS: the embedding and the loss each take a layer's pipeline slot
                   "embedding_in_pipeline_slot": _true(env.get("ASYM_PP_EMBED")),
                   "loss_in_pipeline_slot": _true(env.get("ASYM_PP_LOSS"))},
        "time_to_train_min": round(published, 4), "olympic_mean_min": round(published / scaling, 4),
        "scaling_factor": scaling, "runs": len(logs), "converged_runs": len(converged),
        "samples_to_target_mean": round(statistics.mean(samples)) if samples else None,
        "step_time_s": None if step_time is None else round(step_time, 4), "step_time_from": step_from,
        "source": {"results": repo.source(f"{folder}/result_*.txt"), "config": repo.source(config),
                   "system": repo.source(f"NVIDIA/systems/{system}.json")},
    }


def collect(mirror: Path) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    rows, skipped, missing = [], [], []
    for version in VERSIONS:
        name = f"mlcommons/training_results_v{version}"
        path = mirror / f"mlcommons+training_results_v{version}" / "repo"
        if not path.is_dir():
            missing.append(name)
            continue
        repo = Repo(path, name)
        folders = sorted({p.rsplit("/", 1)[0] for p in repo.files if re.match(
            rf"NVIDIA/results/[^/]+/({'|'.join(BENCHMARKS)})/result_\d+\.txt$", p)})
        for folder in folders:
            system, bench = folder.split("/")[2:4]
            row = run_row(repo, version, bench, system)
            if isinstance(row, str):
                skipped.append(f"{name} {folder}: {row}")
            else:
                rows.append(row)
    return rows, skipped, missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", default=os.environ.get("CLUSTERSIM_MLPERF_MIRROR", str(ROOT.parent / ".mirror")))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    rows, skipped, missing = collect(Path(args.mirror))
    if missing and not rows:
        print(f"no snapshot of {', '.join(missing)} under {args.mirror}: nothing written (fetch them first)")
        return 0
    doc = {"about": "NVIDIA's closed-division MLPerf Training LLM runs: the published score (result_summarizer's "
                    "olympic mean of run_start-to-run_stop minutes times scaling.json's factor), the median logged "
                    "step time, and the layout of the submission's config script. Written by "
                    "bench/mlperf_results.py from the repositories named in each row's source; not fitted on.",
           "missing_snapshots": missing, "skipped": skipped, "runs": rows}
    text = json.dumps(doc, indent=1) + "\n"
    for line in skipped:
        print(f"skipped {line}")
    if args.check:
        fresh = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.name} is {'current' if fresh else 'stale'} ({len(rows)} runs)")
        return 0 if fresh else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(rows)} runs to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
