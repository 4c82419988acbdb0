"""Other readings of what a source leaves unstated: a source group's rows simulated under each, beside the one
`clustersim validate` keeps, to show how much of the group's error the reading decides.

validate fills a source's unstated settings one way for all its rows (simcore/calibration/validate.py says which
and why); a reading here changes that for a whole group at once and is only reported, never used to judge or fit
a row, and never chosen per row.

Narayanan'21 Table 1: validate runs each row as its authors' launch script did (simcore/calibration/
launch_scripts.py); the other reading is the source's defaults alone, what validate ran before those scripts were
read (microbatch 1, plain 1F1B, the gradient all-reduce after backward).

NeMo T5-3B (NeMo-Framework-Launcher README @80353286, sec. 7.2/7.3): the rows name apex's distributed Adam, the
launcher's t5 configs of 2023. The same six figures entered the launcher's README on 2022-09-01 (commit 53591656,
chart 3B_T5_throughput_2208), when t5/3b.yaml set `optim: fused_adam` with `megatron_amp_O2` and
`grad_allreduce_chunk_size_mb: 125`; distributed Adam came to those configs on 2022-11-15 (e7bd4ef4). With that
optimizer NeMo v1.11 keeps fp32 main gradients and all-reduces them across the data-parallel group, every rank
stepping the whole (unsharded) optimizer: MainParamsOptimizerWrapper with async_grad_allreduce, launched chunk by
chunk (125 MiB, strictly in buffer order) from gradient hooks during the last microbatch's backward
(megatron_lm_encoder_decoder_model.py training_step, `custom_sync_context_handler = self._optimizer.no_sync` when
pipeline parallelism is off; nemo/core/optim/optimizer_with_main_params.py). Two readings follow from it: the
all-reduce overlapped with backward as that code launches it, and the same all-reduce after backward.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simcore.calibration.validate import load_reference, measured_time, scenario_for
from simcore.domain.layout import Schedule
from simcore.simulate import Scenario, simulate


@dataclass(frozen=True, slots=True)
class Reading:
    """One way to fill a group's unstated settings: the Layout fields it replaces (none: validate's own)."""

    name: str
    layout: tuple[tuple[str, Any], ...] = ()


NARAYANAN_GROUP = "narayanan21-t1-"
NARAYANAN_READINGS = (
    Reading("the authors' launch scripts (as validate runs them)"),
    Reading("the source's defaults alone: microbatch 1, 1F1B, all-reduce after backward",
            (("microbatch_size", 1), ("overlap_grad_reduce", False), ("schedule", Schedule.ONE_F_ONE_B),
             ("virtual_stages", 1))),
)
T5_GROUP = "nemo-t5-3b-"
T5_READINGS = (
    Reading("distributed Adam, reduction after backward (as validate runs them)"),
    Reading("fused Adam, all-reduce after backward", (("zero_stage", 0), ("overlap_grad_reduce", False))),
    Reading("fused Adam, all-reduce overlapped with backward", (("zero_stage", 0), ("overlap_grad_reduce", True))),
)


def group_rows(prefix: str, reference: str | None = None) -> list[dict[str, Any]]:
    """The reference rows whose id starts with `prefix`, by GPU count."""
    rows = [c for c in load_reference(reference) if str(c.get("id", "")).startswith(prefix)]
    return sorted(rows, key=lambda c: int(c["cluster"]["num_gpus"]))


def scenario(row: dict[str, Any], reading: Reading) -> Scenario:
    """The request a row describes, under `reading`."""
    base = scenario_for(row)
    return replace(base, layout=replace(base.layout, **dict(reading.layout))) if reading.layout else base


def errors(rows: list[dict[str, Any]], reading: Reading) -> list[tuple[str, float]]:
    """(row id, error %) of every row simulated under `reading`: predicted against measured iteration time."""
    out = []
    for row in rows:
        measured = measured_time(row)
        assert measured is not None, f"{row['id']} has no measured time"
        predicted = simulate(scenario(row, reading)).metrics.iteration_time_s
        out.append((str(row["id"]), 100.0 * (predicted - measured) / measured))
    return out


def drift(errs: list[tuple[str, float]]) -> float:
    """How far the error moves across the group: the largest minus the smallest, in points."""
    values = [e for _, e in errs]
    return max(values) - min(values)
