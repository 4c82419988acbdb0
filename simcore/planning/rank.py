"""Simulating and explaining search candidates (no I/O).

- `evaluate`: one candidate through `simcore.simulate.simulate`, reduced to what a ranking needs; a picklable
  value, the same whichever process or machine ran it.
- `explain`: why a candidate is where it is (simcore.planning.search orders them by its goal,
  simcore.planning.objective); `describe`: a layout in one line.

Which candidates are simulated first is simcore.planning.estimate's closed form; every figure ranked here is the
simulator's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from simcore.domain.layout import Layout
from simcore.engine.recorder import Category
from simcore.network import Network
from simcore.simulate import Scenario, simulate
from simcore.training_plan import TrainingPlan
from topology.hardware import GIB


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What the simulator said about one candidate (ranked by tokens_per_s)."""

    index: int
    tokens_per_s: float
    samples_per_s: float
    iteration_time_s: float
    mfu: float
    hardware_tflops_per_gpu: float
    bubble_fraction: float
    pipeline_overhead: float
    time_breakdown_s: dict[str, float]
    communication_s: dict[str, float]
    peak_memory_gib: float
    capacity_gib: float
    fits: bool
    warnings: tuple[str, ...]
    events: int
    training: TrainingPlan | None = None  # the whole run, when the scenario describes one

    @property
    def exposed_communication_s(self) -> dict[str, float]:
        """Communication the critical rank's compute stream waited for, by kind (ZeRO's gathers count as dp)."""
        b = self.time_breakdown_s
        return {"tp": b[Category.TP_COMM], "pp": b[Category.PP_COMM], "dp": b[Category.DP_COMM],
                **({"cp": b[Category.CP_COMM]} if Category.CP_COMM in b else {})}

    @property
    def headroom_gib(self) -> float:
        return self.capacity_gib - self.peak_memory_gib


def evaluate(task: tuple[int, Scenario], network: Network | None = None,
             progress: Callable[[int, int], None] | None = None) -> Evaluation:
    """Simulate one candidate (no spans kept). A module-level function so that process pools and Ray can run it;
    `network` may carry the built cluster of earlier candidates on the same cluster; `progress` is simulate's."""
    index, scenario = task
    outcome = simulate(replace(scenario, keep_spans=False), network, progress)
    m = outcome.metrics
    return Evaluation(
        index=index, tokens_per_s=m.tokens_per_s, samples_per_s=m.samples_per_s,
        iteration_time_s=m.iteration_time_s, mfu=m.mfu, hardware_tflops_per_gpu=m.hardware_tflops_per_gpu,
        bubble_fraction=m.bubble_fraction, pipeline_overhead=m.pipeline_overhead,
        time_breakdown_s=dict(m.time_breakdown_s), communication_s=dict(m.communication_s),
        peak_memory_gib=m.peak_stage.memory.total / GIB, capacity_gib=m.capacity_gib, fits=m.fits,
        warnings=outcome.warnings, events=outcome.events, training=outcome.training)


def describe(layout: Layout) -> str:
    """A layout in one short line, e.g. 'DP 6 x TP 8 x PP 64, mb 1, 1f1b, ZeRO 1, recompute full'; CP where above
    1, and EP in parentheses (it spreads the experts over ranks the other dimensions count already):
    'DP 8 x TP 1 x PP 1 x CP 2 (x EP 8), ...'."""
    parts = [f"DP {layout.dp} x TP {layout.tp} x PP {layout.pp}" + (f" x CP {layout.cp}" if layout.cp > 1 else "")
             + (f" (x EP {layout.ep})" if layout.ep > 1 else ""), f"mb {layout.microbatch_size}"]
    parts.append(f"{layout.schedule} v{layout.virtual_stages}" if layout.virtual_stages > 1 else str(layout.schedule))
    parts.append(f"ZeRO {layout.zero_stage}")
    parts.append(f"recompute {layout.recompute}")
    if layout.sequence_parallel:
        parts.append("SP" + (" + TP overlap" if layout.tp_comm_overlap else ""))
    if layout.async_tensor_model_parallel_allreduce and layout.tp > 1 and not layout.tp_comm_overlap:
        parts.append("async TP")
    if layout.fp8 is not None:
        scaling = ", current scaling" if layout.fp8_scaling == "current" else ""
        parts.append(f"fp8 {layout.fp8_recipe or 'tensorwise'}{scaling}" if layout.precision == "fp8"
                     else str(layout.precision))
    if layout.cp > 1 and layout.cp_comm != "p2p":
        parts.append(f"CP {layout.cp_comm}")
    if layout.placement not in ("tp,dp,pp", "tp,cp,dp,pp"):
        parts.append(f"placement {layout.placement}")
    if not layout.overlap_grad_reduce:
        parts.append("no grad overlap")
    return ", ".join(parts)


def explain(layout: Layout, e: Evaluation, best: Evaluation | None = None) -> list[str]:
    """Why a candidate ranks where it does: its bubble, its exposed communication, its memory headroom, and
    (for a runner-up) how far it is from the best."""
    m = layout.num_microbatches
    T = e.iteration_time_s
    if layout.pp > 1:
        shape = f"{layout.pp} stages, {m} microbatches" + (
            f", {layout.virtual_stages} chunks per rank" if layout.virtual_stages > 1 else "")
        bubble = f"pipeline bubble {100 * e.bubble_fraction:.1f}% of the iteration ({shape})"
    else:
        bubble = "no pipeline, no bubble"
    exposed = e.exposed_communication_s
    total = sum(exposed.values())
    comm = (f"exposed communication {total:.3g} s ({100 * total / T:.1f}%): "
            + ", ".join(f"{kind} {seconds:.3g} s" for kind, seconds in exposed.items()))
    memory = (f"memory {e.peak_memory_gib:.1f} of {e.capacity_gib:.0f} GiB per GPU, "
              f"{e.headroom_gib:.1f} GiB headroom")
    compute = (f"{e.hardware_tflops_per_gpu:.0f} hardware TFLOP/s per GPU, MFU {100 * e.mfu:.1f}%, "
               f"recompute {e.time_breakdown_s['recompute']:.3g} s")
    lines = [bubble, comm, memory, compute]
    if best is not None and best.index != e.index:
        lines.append(f"{100 * (1 - e.tokens_per_s / best.tokens_per_s):.1f}% fewer tokens/s than the best")
    return lines
