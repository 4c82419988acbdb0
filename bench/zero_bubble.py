"""The Zero Bubble paper's setups (reference rows `zb-*`, simcore/calibration/zero_bubble.py): the simulated
per-stage T_F, T_B, T_W of a middle stage against the paper's profiled ones (Table 9), where the difference lies
(per kernel, and beyond the projections' GEMMs), and the simulated speed-ups of ZB-H1 and ZB-H2 (with
post-validation, as the paper ran them) over 1F1B on the setups with m >= 2p.

    python bench/zero_bubble.py                 # the tables
    python bench/zero_bubble.py --json          # the figures
    python bench/zero_bubble.py --kernels [ID]  # one pass-time row's layer, kernel by kernel (F, B, W in ms)

What the paper profiled (sail-sg/zero-bubble-pipeline-parallelism, branch `arxiv`, commit f68d3879):
- T_W is the four projections' weight-gradient GEMMs per layer and nothing else: the linear layers' backward
  (megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward, lines
  402-426) hands (input, output gradient, weight) to WeightGradStore.put instead of calling apex's
  wgrad_gemm_accum_fp32/fp16, and the W pass (megatron/core/weight_grad_store.py, pop) runs those GEMMs into
  main_grad. The bias gradient (`grad_output.sum(dim=0)`, line 447), the input-gradient GEMM and every
  elementwise backward run in B.
- Each F, B and W is timed between two device synchronisations (megatron/timers.py, Timer.start/stop:
  torch.cuda.synchronize) over the profiling iterations, per rank; the figures handed to the scheduler are the
  median over all ranks (megatron/core/pipeline_parallel/zb_schedules.py, update_schedule): a middle stage's.
The simulation splits a backward pass the same way (simcore/cost/compute/weight_gradients.py): W is the
projections' weight-gradient products alone, B the rest. `decomposition` below reads where the measured passes
differ from the simulated ones: at the rate the paper's W pass gives its GEMMs, what the other kernels of a
forward and of an input-gradient pass took, against what the model gives them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

from simcore.calibration import zero_bubble
from simcore.calibration.validate import load_reference
from simcore.cost.compute.kernel_time import op_time, weight_gradient_time
from simcore.cost.compute.kernels import PROJECTIONS
from simcore.cost.compute.moe_kernels import transformer_layer_ops
from simcore.cost.compute.weight_gradients import WEIGHT_GEMMS
from simcore.cost.parameters import FITTED
from simcore.domain.layout import Schedule
from simcore.simulate import simulate
from topology.hardware import GPUS

# The targets: the per-stage times within 15%, the speed-ups in these ranges.
PASS_TIME_TOLERANCE = 0.15
SPEEDUP_RANGES = {"zb_h1": (1.03, 1.20), "zb_h2": (1.05, 1.35)}
KERNEL_ROW = "zb-t9-1.5b-m24-pass-times"


def rows() -> list[dict[str, Any]]:
    return [c for c in load_reference(None, "training-runs-modern.json") if zero_bubble.handles(c)]


def pass_time_rows() -> list[dict[str, Any]]:
    return [c for c in rows() if c.get("kind") == "microbenchmark"]


def pass_times() -> list[dict[str, Any]]:
    """Per pass-time row: measured and simulated T_F, T_B, T_W (ms) of a middle stage."""
    out = []
    for case in pass_time_rows():
        stage = simulate(zero_bubble.scenario_for(case, Schedule.ZB_H1)).metrics.stages[1]
        simulated = {"T_F": stage.forward_s * 1e3, "T_B": stage.backward_input_s * 1e3,
                     "T_W": stage.backward_weight_s * 1e3}
        out.append({"id": case["id"], "measured_ms": {k: case["measured"][k] for k in simulated},
                    "simulated_ms": simulated,
                    "error_pct": {k: 100 * (simulated[k] / case["measured"][k] - 1) for k in simulated}})
    return out


def layer_kernels(case: dict[str, Any]) -> list[dict[str, Any]]:
    """One layer of the row's middle stage, kernel by kernel: its forward (F), its backward less the weight
    gradients (B) and its weight gradients (W), ms, by the fitted cost model on the row's GPU."""
    scenario = zero_bubble.scenario_for(case)
    layout, model = scenario.layout, scenario.model
    gpu = GPUS[scenario.cluster.gpu]
    out = []
    for op in transformer_layer_ops(model, layout.microbatch_size, layout.tp, layout.sequence_parallel,
                                    model.main_layer()):
        backward = op.backward()
        weight = weight_gradient_time(backward, gpu, FITTED) if op.name in WEIGHT_GEMMS else 0.0
        out.append({"kernel": op.name, "F_ms": op_time(op, gpu, FITTED) * 1e3,
                    "B_ms": (op_time(backward, gpu, FITTED) - weight) * 1e3, "W_ms": weight * 1e3,
                    "gflop": op.flops / 1e9, "mbytes": op.bytes / 1e6})
    return out


def decomposition() -> list[dict[str, Any]]:
    """Per pass-time row, per layer of its middle stage: the rate of the paper's W pass (its projections'
    weight-gradient GEMMs, as many FLOPs as the projections of F and of B), and, with the projections of F and B
    at that rate, what F and B took beyond them (measured: T - T_W over the layers) against what the model gives
    the same kernels (`modelled`), and the difference per element of the layer's tokens x hidden activation and
    per attention score, in picoseconds."""
    out = []
    for case in pass_time_rows():
        scenario = zero_bubble.scenario_for(case)
        layout, model = scenario.layout, scenario.model
        assert layout.stage_layers is not None
        layers = layout.stage_layers[1]
        kernels = layer_kernels(case)
        flops = sum(k["gflop"] for k in kernels if k["kernel"] in PROJECTIONS) * 1e9 * layers
        measured = {k: case["measured"][k] / layers for k in ("T_F", "T_B", "T_W")}
        modelled = {"T_F": sum(k["F_ms"] for k in kernels if k["kernel"] not in PROJECTIONS),
                    "T_B": sum(k["B_ms"] for k in kernels if k["kernel"] not in PROJECTIONS)}
        tokens_hidden = layout.microbatch_size * model.seq_length * model.hidden_size
        scores = layout.microbatch_size * model.num_attention_heads * model.seq_length ** 2
        row: dict[str, Any] = {"id": case["id"], "w_tflop_per_s": flops / (case["measured"]["T_W"] * 1e-3) / 1e12}
        for name, key in (("forward", "T_F"), ("backward_input", "T_B")):
            beyond = measured[key] - measured["T_W"]
            excess_s = (beyond - modelled[key]) * 1e-3
            row[name] = {"beyond_projections_ms": beyond, "modelled_ms": modelled[key],
                         "excess_ps_per_token_hidden": excess_s / tokens_hidden * 1e12,
                         "excess_ps_per_score": excess_s / scores * 1e12}
        out.append(row)
    return out


def speedups(ids: set[str] | None = None) -> list[dict[str, Any]]:
    """Per 1F1B row with m >= 2p (of `ids`, if given): simulated iteration times and the zero-bubble schedules'
    speed-ups."""
    out = []
    for case in rows():
        lay = case["layout"]
        if case.get("kind") != "training" or int(lay["num_microbatches"]) < 2 * int(lay["pp"]):
            continue
        if ids is not None and case["id"] not in ids:
            continue
        base = zero_bubble.scenario_for(case)
        times = {"1f1b": simulate(base).metrics.iteration_time_s}
        for name, schedule in (("zb_h1", Schedule.ZB_H1), ("zb_h2", Schedule.ZB_H2)):
            layout = replace(base.layout, schedule=schedule, optimizer_post_validation=True)
            times[name] = simulate(replace(base, layout=layout)).metrics.iteration_time_s
        out.append({"id": case["id"], "iteration_s": times,
                    "speedup": {k: times["1f1b"] / times[k] for k in SPEEDUP_RANGES}})
    return out


def print_kernels(row_id: str) -> None:
    case = next((c for c in pass_time_rows() if c["id"] == row_id), None)
    if case is None:
        known = ", ".join(c["id"] for c in pass_time_rows())
        raise SystemExit(f"--kernels: {row_id} is not a pass-time row (one of: {known})")
    kernels = layer_kernels(case)
    print(f"{row_id}: one layer of a middle stage (ms)\nkernel                  F        B        W    GFLOP      MB")
    for k in kernels:
        times = "  ".join(f"{k[key]:7.3f}" for key in ("F_ms", "B_ms", "W_ms"))
        print(f"{k['kernel']:20} {times}  {k['gflop']:7.1f}  {k['mbytes']:7.1f}")
    totals = {key: sum(k[key] for k in kernels) for key in ("F_ms", "B_ms", "W_ms")}
    print(f"{'layer':20} {totals['F_ms']:7.3f}  {totals['B_ms']:7.3f}  {totals['W_ms']:7.3f}")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--kernels"]:
        print_kernels(args[1] if len(args) > 1 else KERNEL_ROW)
        return
    report = {"pass_times": pass_times(), "decomposition": decomposition(), "speedups": speedups()}
    if args == ["--json"]:
        print(json.dumps(report, indent=1))
        return
    print("row                          T_F meas/sim     T_B meas/sim     T_W meas/sim  (ms)")
    for r in report["pass_times"]:
        cells = "  ".join(f"{r['measured_ms'][k]:6.2f}/{r['simulated_ms'][k]:6.2f}" for k in ("T_F", "T_B", "T_W"))
        print(f"{r['id']:28} {cells}")
    print("\nper layer, projections at the W pass's rate: F and B beyond them, measured/modelled (ms), and the"
          "\ndifference per tokens x hidden element and per attention score (ps)")
    print("row                          W TFLOP/s   F beyond    ps/th  ps/score   B beyond    ps/th  ps/score")
    for r in report["decomposition"]:
        cells = "".join(f"  {r[p]['beyond_projections_ms']:5.2f}/{r[p]['modelled_ms']:4.2f}"
                        f"  {r[p]['excess_ps_per_token_hidden']:7.1f}  {r[p]['excess_ps_per_score']:7.2f}"
                        for p in ("forward", "backward_input"))
        print(f"{r['id']:28} {r['w_tflop_per_s']:8.0f} {cells}")
    print("\nrow                          1F1B s    ZB-H1 speed-up  ZB-H2 speed-up")
    for r in report["speedups"]:
        print(f"{r['id']:28} {r['iteration_s']['1f1b']:7.3f}   {r['speedup']['zb_h1']:6.3f}          "
              f"{r['speedup']['zb_h2']:6.3f}")


if __name__ == "__main__":
    main()
