"""What a source's own launch scripts set for each of its runs, where its table leaves it out.

Narayanan et al. 2021 (SC21), Table 1: the authors published the scripts that produced the table, Megatron-LM's
examples/sc21/run_table_1.sh with CONFIG.sh and SRUN.sh (commits de7dc40f88 and 6985e58938, August 2021; since
2024 under examples/academic_paper_scripts/sc21/, unchanged). Per model size they give the microbatch
(`--micro-batch-size`), the data-parallel implementation (`--DDP-impl torch` for the runs without pipeline
parallelism: PyTorch's DistributedDataParallel, which all-reduces gradient buckets while backward runs; `local`
for the pipelined ones: Megatron's own, which all-reduces once backward is over) and, for four of them, the
interleaved schedule's layers per virtual stage (`--num-layers-per-virtual-pipeline-stage`; without it Megatron
runs plain 1F1B). The rest of CONFIG.sh (`--fp16`, `--seq-length 2048`, full recomputation through
`--activations-checkpoint-method uniform`) is what validate's defaults for the source already say. PyTorch's DDP
buckets 25 MB of gradients; the simulation buckets as Megatron-Core does (simcore/cost/parameters.py,
DP_BUCKET_ELEMENTS), which changes only how much of the reduction is left after the last layer's backward.

A row is matched by what the script describes (layers, hidden size, TP, PP and global batch), never by its id;
a row's own layout fields still come first (simcore/calibration/validate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RunSettings:
    """A run's settings from its launch script."""

    microbatch_size: int
    overlap_grad_reduce: bool  # --DDP-impl torch (True) or local (False)
    layers_per_virtual_stage: int | None = None  # None: 1F1B without interleaving


# run_table_1.sh: (NLS, HS, TP, PP, GBS) -> (MBS, DDP == torch, --num-layers-per-virtual-pipeline-stage).
SC21_TABLE_1: dict[tuple[int, int, int, int, int], RunSettings] = {
    (24, 2304, 1, 1, 512): RunSettings(16, True),  # 1.7B
    (30, 3072, 2, 1, 512): RunSettings(16, True),  # 3.6B
    (36, 4096, 4, 1, 512): RunSettings(16, True),  # 7.5B
    (40, 6144, 8, 1, 1024): RunSettings(8, True),  # 18B
    (48, 8192, 8, 2, 1536): RunSettings(4, False),  # 39B
    (60, 10240, 8, 4, 1792): RunSettings(2, False, 5),  # 76B
    (80, 12288, 8, 8, 2304): RunSettings(2, False, 5),  # 145B
    (96, 16384, 8, 16, 2160): RunSettings(1, False, 3),  # 310B
    (105, 20480, 8, 35, 2520): RunSettings(1, False, 1),  # 530B
    (128, 25600, 8, 64, 3072): RunSettings(1, False),  # 1T
}

# Per source (a row id's prefix): its scripts' runs.
SCRIPTS: dict[str, dict[tuple[int, int, int, int, int], RunSettings]] = {"narayanan21": SC21_TABLE_1}


def settings_for(source: str, model: dict[str, Any], layout: dict[str, Any]) -> RunSettings | None:
    """The launch-script settings of the run a reference row describes, if its source published them."""
    runs = SCRIPTS.get(source)
    if runs is None or "layers" not in model or "global_batch" not in layout:
        return None
    key = (int(model["layers"]), int(model["hidden"]), int(layout["tp"]), int(layout["pp"]),
           int(layout["global_batch"]))
    return runs.get(key)
