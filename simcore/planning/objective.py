"""What a search ranks by (its `objective`), and the score that orders candidates by it (no I/O).

- `time`: the most tokens per second (the default; the same order as the fewest days to train).
- `cost`: the cheapest whole run: its cost in USD when the run has a GPU-hour price, else its GPU-hours (the same
  order at any one price). Checkpoints and the expected failures and restarts count: they are paid for.
- `goodput_time`: the fewest days to train with checkpoints, failures and restarts included.

On one cluster size `cost` and `time` order layouts alike (GPU-hours are days times a fixed GPU count); they part
when a search tries several cluster sizes (the space's `num_nodes`): more GPUs finish sooner but a layout that
scales less than linearly costs more per token, and a larger job fails more often (its MTBF is the per-GPU MTBF
over the GPU count), which `goodput_time` counts. `cost` and `goodput_time` need the run described (the request's
`training` section); every figure comes from simcore.training_plan.plan_training on the simulated (or, for ordering
only, the estimated) tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from simcore.domain.model import ModelShape
from simcore.domain.training import TrainingRun, validate_training
from simcore.errors import SpecError
from simcore.training_plan import TrainingPlan, plan_training
from topology.cluster_spec import ClusterSpec
from topology.hardware import GPUS


class Objective(StrEnum):
    TIME = "time"
    COST = "cost"
    GOODPUT_TIME = "goodput_time"


@dataclass(frozen=True, slots=True)
class Goal:
    """The objective and, for `cost` and `goodput_time`, the whole run it is measured on."""

    objective: Objective = Objective.TIME
    training: TrainingRun | None = None

    def validate(self) -> Goal:
        if self.objective is not Objective.TIME and self.training is None:
            raise SpecError("training", f"required with objective '{self.objective}': the run's tokens (and, for "
                                        "goodput_time, its checkpoints and failures) decide the ranking")
        if self.training is not None:
            validate_training(self.training)
        return self


def plan_for(goal: Goal, model: ModelShape, cluster: ClusterSpec, tokens_per_s: float,
             global_batch_size: int) -> TrainingPlan | None:
    """The whole run at `tokens_per_s` on `cluster` (None without a training section)."""
    if goal.training is None:
        return None
    return plan_training(goal.training, tokens_per_s=tokens_per_s,
                         tokens_per_iteration=global_batch_size * model.tokens_per_sample,
                         parameters=model.total_parameters(), num_gpus=cluster.num_gpus,
                         num_nodes=cluster.num_nodes, gpu_power_w=GPUS[cluster.gpu].tdp_w)


def score(goal: Goal, tokens_per_s: float, plan: TrainingPlan | None) -> float:
    """Lower is better. `plan` is the run at `tokens_per_s` (required for cost and goodput_time)."""
    if goal.objective is Objective.TIME:
        return -tokens_per_s
    if plan is None:
        raise SpecError("training", f"required with objective '{goal.objective}'")
    if goal.objective is Objective.COST:
        totals = plan.with_failures
        return totals.cost_usd if totals.cost_usd is not None else totals.gpu_hours
    return plan.with_failures.days


def _included(goal: Goal) -> str:
    """What the run's figure counts beyond the iterations: only the sections the request has."""
    run = goal.training
    parts = [name for name, section in (("failures", run.failures if run else None),
                                        ("checkpoints", run.checkpoint if run else None)) if section is not None]
    return " and ".join(parts)


def describe_score(goal: Goal, plan: TrainingPlan | None) -> str | None:
    """The objective's figure in words, e.g. 'cost 1.23e+06 USD (412,000 GPU-hours)'; None for time. It says
    "failures" or "checkpoints" included only when the request has that section."""
    if goal.objective is Objective.TIME or plan is None:
        return None
    totals = plan.with_failures
    included = _included(goal)
    if goal.objective is Objective.COST:
        money = f"{totals.cost_usd:,.0f} USD, " if totals.cost_usd is not None else ""
        return (f"cost {money}{totals.gpu_hours:,.0f} GPU-hours to train"
                + (f" ({included} included)" if included else ""))
    if not included:
        return f"{totals.days:.2f} days to train"
    return (f"{totals.days:.2f} days to train with {included} "
            f"({plan.without_failures.days:.2f} without; goodput {plan.goodput:.3f})")
