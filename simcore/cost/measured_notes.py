"""Where a simulation extrapolated from the user's measurements (cluster.measured), in words: its result's
warnings. The collectives' uses are what MeasuredCollectives recorded while the simulation priced them (sizes
outside a table's rows, groups of another configuration than the table's own, a configuration that does not fit
on the cluster, a transfer table's one bandwidth for every size); the GEMM sweep's are the layout's GEMM shapes
that lie outside the box its rows of their dtype span, found from the layout's kernels (their nearest measured
shape's ratio scales the model's time: simcore/cost/compute/measured_gemm.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from simcore.cost.comm.measured_collectives import MeasuredCollectives, TableUse
from simcore.cost.compute.gemm_shape import Product, gradient_products
from simcore.cost.compute.kernel_time import gemm_dtype
from simcore.cost.compute.kernels import OpKind, logits_forward_ops
from simcore.cost.compute.measured_gemm import rows_for
from simcore.cost.compute.moe_kernels import transformer_layer_ops
from simcore.cost.context_parallel import local_model
from simcore.cost.mtp import mtp_forward_ops
from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape
from topology.cluster_spec import ClusterSpec
from topology.measured import MeasuredGemm

__all__ = ["collective_notes", "gemm_notes", "layout_gemm_shapes", "measured_warnings"]

_TRANSFERS = {"sendrecv": "point-to-point sends", "alltoall": "MoE all-to-alls"}
_SHOWN = 4  # groups and shapes named in a note; the rest counted


def _size(nbytes: float) -> str:
    """Bytes in binary units, three figures: 8 GiB, 1.5 MiB, 512 B."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.3g} B"


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def collective_notes(uses: Iterable[TableUse]) -> list[str]:
    """One warning per measured table the simulation extrapolated from (none for a table it used only within its
    rows, on its own configuration)."""
    notes = []
    for use in uses:
        t = use.table
        hosts = "1 host" if t.nodes == 1 else f"{t.nodes} hosts"
        parts = []
        if use.transfers:
            parts.append("not applied: its configuration does not fit on this cluster" if use.unplaced else
                         f"its bandwidth at {_size(t.sizes_bytes[-1])} scaled the model's "
                         f"{_TRANSFERS[t.collective]} of every size")
        else:
            if use.outside_bytes:
                below = [s for s in use.outside_bytes if s < t.sizes_bytes[0]]
                above = [s for s in use.outside_bytes if s > t.sizes_bytes[-1]]
                spans = ([f"{len(below)} below, down to {_size(min(below))}"] if below else []) + (
                    [f"{len(above)} above, up to {_size(max(above))}"] if above else [])
                parts.append(f"message sizes outside its {_size(t.sizes_bytes[0])} to {_size(t.sizes_bytes[-1])} "
                             f"({'; '.join(spans)}) took the model's curve scaled by the ratio at the nearest "
                             "measured size")
            if use.groups:
                groups = [f"{r} ranks over {h} hosts in {d} NVLink domain{'s' if d > 1 else ''}"
                          for r, h, d in sorted(use.groups)]
                parts.append(f"groups of another configuration ({_listed(groups)}) took the model's difference "
                             "to the table's configuration")
            if use.unplaced:
                parts.append("its configuration does not fit on this cluster: its bus bandwidth was taken for the "
                             "groups' own")
        if parts:
            notes.append(f"measured {t.collective} ({t.ranks} ranks over {hosts}) extrapolated: " + "; ".join(parts))
    return notes


def layout_gemm_shapes(model: ModelShape, layout: Layout) -> dict[str, set[Product]]:
    """The GEMM products one rank of the layout runs, forward and backward, by dtype (bf16, fp8 or fp4): its layers'
    (every layer type), the logits' and multi-token prediction's."""
    local = local_model(model, layout.cp)
    b, t, sp = layout.microbatch_size, layout.tp, layout.sequence_parallel
    ops = [op for layer, _ in local.layer_stacks()
           for op in transformer_layer_ops(local, b, t, sp, layer, layout.fp8, layout.ep, layout.expert_tp)]
    ops += logits_forward_ops(local, b, t, sp)
    if local.mtp_layers:
        ops += mtp_forward_ops(local, b, t, sp)
    shapes: dict[str, set[Product]] = {}
    for op in ops:
        if op.kind is OpKind.GEMM and op.shape is not None:
            shapes.setdefault(gemm_dtype(op), set()).update((op.shape, *gradient_products(op.shape)))
    return shapes


def gemm_notes(shapes: Mapping[str, set[Product]], rows_of: Mapping[str, Sequence[MeasuredGemm]]) -> list[str]:
    """Warnings for the GEMM shapes (by dtype) outside the box the rows of their dtype span, or of a dtype with no
    rows, for each GPU (`rows_of`: the rows that apply to it, by its name) that has rows."""
    notes = []
    for gpu, rows in rows_of.items():
        if not rows:
            continue
        for dtype, products in sorted(shapes.items()):
            mine = [r for r in rows if r.dtype == dtype]
            if not mine:
                notes.append(f"measured GEMM sweep on {gpu}: no {dtype} rows; the {len(products)} {dtype} GEMM "
                             "shapes of this layout keep the model's times")
                continue
            box = {d: (min(getattr(r, d) for r in mine), max(getattr(r, d) for r in mine)) for d in "mnk"}
            outside = sorted((p for p in products
                              if any(not box[d][0] <= getattr(p, d) <= box[d][1] for d in "mnk")),
                             key=lambda p: (p.m, p.n, p.k, p.batch))
            if outside:
                span = ", ".join(f"{d} {box[d][0]:g}-{box[d][1]:g}" for d in "mnk")
                named = [f"{p.m:g}x{p.n:g}x{p.k:g}" + (f" (x{p.batch:g})" if p.batch > 1 else "") for p in outside]
                notes.append(f"measured GEMM sweep on {gpu} extrapolated: {len(outside)} of the {len(products)} "
                             f"{dtype} GEMM shapes of this layout (m x n x k) lie outside its rows' {span} "
                             f"({_listed(named)}): the model's time scaled by the nearest measured shape's ratio")
    return notes


def measured_warnings(model: ModelShape, layout: Layout, cluster: ClusterSpec,
                      tables: MeasuredCollectives | None) -> list[str]:
    """A simulation's warnings of where it extrapolated from the cluster's measurements: its collectives' uses of
    the tables (`tables.used`, recorded since the simulation started), and its GEMM shapes against each GPU's
    sweep."""
    notes = collective_notes(tables.used.values()) if tables is not None else []
    gemms = tuple(cluster.measured.gemms) if cluster.measured is not None else ()
    if gemms:
        gpus = [g.hardware for g in cluster.node_groups] or [cluster.hardware]
        notes += gemm_notes(layout_gemm_shapes(model, layout),
                            {gpu.label: rows_for(gemms, gpu) for gpu in dict.fromkeys(gpus)})
    return notes
