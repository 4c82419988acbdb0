"""The layout search space of one model, cluster and global batch: which layouts exist, in a fixed order, and the
family each belongs to. Pure logic: no I/O.

Generated from the request (every list can be narrowed or widened by the request's `space`):
- tp: the divisors of the GPU count up to the GPUs of a node (tensor parallelism stays on NVLink);
- cp: for a model that context parallelism can split (flash attention, not encoder-decoder), the divisors of
  GPUs / tp that keep seq_length / (2 cp) whole; else 1;
- pp: the divisors of GPUs / (tp * cp) up to the number of layers; dp = GPUs / (tp * cp * pp);
- microbatch size: the divisors of global batch / dp up to `max_microbatch_size`;
- schedule: 1F1B, interleaved 1F1B with every v in 2..`max_virtual_stages` that divides the layers evenly
  (num_layers % (pp * v) == 0, as Megatron requires), and GPipe; a single stage (pp 1) runs 1F1B only. The
  zero-bubble schedules and DualPipe (zb_h1, zb_h2, zb_v, dualpipe) are tried when the space lists them, each
  with its rules (simcore/domain/layout.py) and its memory (simcore/cost/memory.py);
- ZeRO 0-3 when dp > 1 (ZeRO with dp 1 shards nothing), recomputation none / selective / full, sequence
  parallelism off and on when tp > 1, and every order of the placement that maps ranks to different GPUs;
- overlap_grad_reduce on, tp_comm_overlap off, async_tensor_model_parallel_allreduce off (tried only where tp > 1),
  bf16, and for fp8 the tensorwise recipe with delayed scaling (the request's space can list others);
- for a mixture-of-experts model, ep: every divisor of tp * cp * dp that divides num_experts, and expert_tp 1 (the
  request's space can list others; a listed value that breaks a rule is reported with it); dense models: 1.

Which of these layouts are discarded before simulation, and why, is simcore.planning.prune's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

from simcore.domain.layout import CpComm, Fp8Recipe, Fp8Scaling, Layout, Precision, Recompute, Schedule
from simcore.domain.model import AttentionKind, ModelShape

PLACEMENTS = ("tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "dp,pp,tp", "pp,tp,dp", "pp,dp,tp")
SCHEDULE_ORDER = (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED_1F1B, Schedule.GPIPE)
RECOMPUTE_ORDER = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)

@dataclass(frozen=True, slots=True)
class Space:
    """What a search may vary. None: generated from the model, cluster and batch (see the module docstring)."""

    dp: tuple[int, ...] | None = None
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    virtual_stages: tuple[int, ...] | None = None
    microbatch_size: tuple[int, ...] | None = None
    schedule: tuple[Schedule, ...] | None = None
    zero_stage: tuple[int, ...] | None = None
    recompute: tuple[Recompute, ...] | None = None
    sequence_parallel: tuple[bool, ...] | None = None
    placement: tuple[str, ...] | None = None
    overlap_grad_reduce: tuple[bool, ...] = (True,)
    tp_comm_overlap: tuple[bool, ...] = (False,)
    async_tensor_model_parallel_allreduce: tuple[bool, ...] = (False,)  # tried where tp > 1
    precision: tuple[Precision, ...] = (Precision.BF16,)
    fp8_recipe: tuple[Fp8Recipe, ...] = (Fp8Recipe.TENSORWISE,)  # tried where precision is fp8
    fp8_scaling: tuple[Fp8Scaling, ...] = (Fp8Scaling.DELAYED,)  # tried where the fp8 recipe is tensorwise
    cp: tuple[int, ...] | None = None
    cp_comm: tuple[CpComm, ...] = (CpComm.P2P,)  # tried where cp > 1
    max_microbatch_size: int = 8
    max_virtual_stages: int = 8
    min_free_memory_bytes: float = 0.0
    ep: tuple[int, ...] | None = None
    expert_tp: tuple[int, ...] | None = None


# A *family* is the layouts that share dp, tp, pp, ZeRO stage, recomputation, sequence parallelism and cp.
Family = tuple[int, int, int, int, str, bool, int]  # dp, tp, pp, zero_stage, recompute, sequence_parallel, cp


def family_of(layout: Layout) -> Family:
    return (layout.dp, layout.tp, layout.pp, layout.zero_stage, str(layout.recompute), layout.sequence_parallel,
            layout.cp)


def context_parallel_sizes(model: ModelShape, gpus: int) -> tuple[int, ...]:
    """The cp a search tries on `gpus` GPUs (GPUs / tp): the divisors that split each sample into 2 cp whole
    chunks, for a model context parallelism applies to (flash attention, not encoder-decoder); else 1."""
    if model.encoder_decoder or model.attention is not AttentionKind.FLASH:
        return (1,)
    return tuple(c for c in divisors(gpus) if model.seq_length % (2 * c) == 0 or c == 1)


def divisors(n: int) -> list[int]:
    """The divisors of n in increasing order (in O(sqrt n): a batch may have millions of samples)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def space_bound(model: ModelShape, num_gpus: int, gpus_per_node: int, space: Space) -> int:
    """An upper bound of the layouts `enumerate_layouts` generates, from the number of choices of each dimension
    alone (cheap: nothing is enumerated), so a search can be refused before it plans a space too large."""
    tps = len(space.tp) if space.tp is not None else sum(1 for t in divisors(num_gpus) if t <= gpus_per_node)
    pps = len(space.pp) if space.pp is not None else len(divisors(num_gpus))
    mbs = len(space.microbatch_size) if space.microbatch_size is not None else space.max_microbatch_size
    interleave = len(space.virtual_stages) if space.virtual_stages is not None else space.max_virtual_stages
    # Interleaved 1F1B is one schedule per v; the others one each.
    schedules = (len(space.schedule) if space.schedule is not None else len(SCHEDULE_ORDER)) - 1 + interleave
    choices = (len(space.zero_stage) if space.zero_stage is not None else 4,
               len(space.recompute) if space.recompute is not None else len(RECOMPUTE_ORDER),
               len(space.sequence_parallel) if space.sequence_parallel is not None else 2,
               len(space.placement) if space.placement is not None else len(PLACEMENTS),
               len(space.overlap_grad_reduce), len(space.tp_comm_overlap),
               len(space.async_tensor_model_parallel_allreduce), len(_precisions(space)))
    bound = tps * pps * mbs * schedules
    for count in choices:
        bound *= count
    return bound


def distinct_placements(dp: int, tp: int, pp: int, orders: tuple[str, ...] = PLACEMENTS, cp: int = 1) -> list[str]:
    """The orders that put ranks on different GPUs: two orders that differ only in where size-1 dimensions go
    give the same strides for the others, so only the first of them is kept (an order without cp has it right
    after tp)."""
    sizes = {"dp": dp, "tp": tp, "pp": pp, "cp": cp}
    seen: set[tuple[tuple[str, int], ...]] = set()
    out = []
    for order in orders:
        stride, key = 1, []
        names = order.split(",")
        if "cp" not in names:
            names.insert(names.index("tp") + 1, "cp")
        for name in names:
            if sizes[name] > 1:
                key.append((name, stride))
            stride *= sizes[name]
        if tuple(key) not in seen:
            seen.add(tuple(key))
            out.append(order)
    return out


def _schedules(model: ModelShape, pp: int, space: Space) -> list[tuple[Schedule, int]]:
    given = space.schedule
    schedules = given if given is not None else (SCHEDULE_ORDER if pp > 1 else (Schedule.ONE_F_ONE_B,))
    if space.virtual_stages is not None:
        interleave = [v for v in space.virtual_stages if v > 1]
    elif model.encoder_decoder:
        interleave = []  # not for encoder-decoder models (Megatron's rule; validate_layout refuses it)
    else:
        interleave = [v for v in range(2, space.max_virtual_stages + 1) if model.num_layers % (pp * v) == 0]
    out: list[tuple[Schedule, int]] = []
    for schedule in schedules:
        if schedule is Schedule.INTERLEAVED_1F1B:
            out += [(schedule, v) for v in interleave]
        elif space.virtual_stages is None or 1 in space.virtual_stages:
            out.append((schedule, 1))
    return out


def enumerate_layouts(model: ModelShape, num_gpus: int, gpus_per_node: int, global_batch_size: int,
                      space: Space) -> Iterator[Layout]:
    """Every layout of the space, in a fixed order (family by family). Degrees that cannot multiply to the GPU
    count yield one layout that breaks that rule, so that their family is reported with the reason."""
    n, batch = num_gpus, global_batch_size
    tps = space.tp if space.tp is not None else tuple(t for t in divisors(n) if t <= gpus_per_node)
    for tp in tps:
        if n % tp:
            yield Layout(dp=1, tp=tp, pp=1, microbatch_size=1, global_batch_size=batch)
            continue
        cps = space.cp if space.cp is not None else context_parallel_sizes(model, n // tp)
        for cp in cps:
            if (n // tp) % cp:
                yield Layout(dp=1, tp=tp, pp=1, cp=cp, microbatch_size=1, global_batch_size=batch)
                continue
            rest = n // (tp * cp)
            pps = space.pp if space.pp is not None else tuple(p for p in divisors(rest) if p <= model.num_layers)
            for pp in pps:
                if rest % pp:
                    yield Layout(dp=max(1, rest // pp), tp=tp, pp=pp, cp=cp, microbatch_size=1,
                                 global_batch_size=batch)
                    continue
                dp = rest // pp
                if space.dp is not None and dp not in space.dp:
                    continue
                yield from _family_members(model, dp, tp, pp, batch, space, cp)


def _precisions(space: Space) -> list[tuple[Precision, Fp8Recipe | None, Fp8Scaling | None]]:
    """The (precision, FP8 recipe, scaling) of the space: every recipe for fp8, and every scaling for its tensorwise
    recipe (delayed, the default, as None); none for the 16-bit formats."""
    return [(precision, recipe, None if scaling is Fp8Scaling.DELAYED else scaling) for precision in space.precision
            for recipe in (space.fp8_recipe if precision is Precision.FP8 else (None,))
            for scaling in (space.fp8_scaling if recipe is Fp8Recipe.TENSORWISE else (Fp8Scaling.DELAYED,))]


def _experts(model: ModelShape, dp: int, tp: int, cp: int, space: Space) -> list[tuple[int, int]]:
    """The (ep, expert_tp) pairs to try: the space's, or for a MoE model every ep that folds onto the stage's
    tp * cp * dp ranks and divides the experts (expert_tp 1); a dense model's (1, 1)."""
    moe = model.moe
    if moe is None and space.ep is None and space.expert_tp is None:
        return [(1, 1)]
    ranks = tp * cp * dp
    eps = space.ep if space.ep is not None else tuple(
        e for e in divisors(ranks) if moe is not None and moe.num_experts % e == 0)
    etps = space.expert_tp if space.expert_tp is not None else (1,)
    pairs = [(e, t) for e in eps for t in etps]
    if space.ep is None and space.expert_tp is None:
        pairs = [(e, t) for e, t in pairs if ranks % (e * t) == 0]
    return pairs or [(1, 1)]


def _family_members(model: ModelShape, dp: int, tp: int, pp: int, batch: int, space: Space,
                    cp: int = 1) -> Iterator[Layout]:
    zeros = space.zero_stage if space.zero_stage is not None else ((0, 1, 2, 3) if dp > 1 else (0,))
    recomputes = space.recompute if space.recompute is not None else RECOMPUTE_ORDER
    sps = space.sequence_parallel if space.sequence_parallel is not None else ((False, True) if tp > 1 else (False,))
    if space.microbatch_size is not None:
        mbs: tuple[int, ...] = space.microbatch_size
    elif batch % dp == 0:
        mbs = tuple(b for b in divisors(batch // dp) if b <= space.max_microbatch_size)
    else:
        mbs = (1,)  # no microbatch size divides the batch: one layout carries the reason
    schedules = _schedules(model, pp, space)
    placements = distinct_placements(dp, tp, pp, space.placement if space.placement is not None else PLACEMENTS, cp)
    cp_comms = space.cp_comm if cp > 1 else (CpComm.P2P,)
    parallel = list(product(cp_comms, _experts(model, dp, tp, cp, space)))  # (cp_comm, (ep, expert_tp))
    for zero in zeros:
        for recompute in recomputes:
            for sp in sps:
                overlaps = space.tp_comm_overlap
                if not sp:  # tp_comm_overlap needs sequence parallelism: without it, off (if the space allows it)
                    overlaps = (False,) if False in overlaps else overlaps
                # Asynchronous TP collectives change nothing without TP: one value then.
                asynchronous = space.async_tensor_model_parallel_allreduce[:1 if tp == 1 else None]
                overlaps_async = tuple(product(overlaps, asynchronous))
                for mb in mbs:
                    for schedule, v in schedules:
                        for placement in placements:
                            for grad_overlap in space.overlap_grad_reduce:
                                for tp_overlap, tp_async in overlaps_async:
                                    for precision, recipe, scaling in _precisions(space):
                                        for cp_comm, (ep, etp) in parallel:
                                            yield Layout(
                                                dp=dp, tp=tp, pp=pp, microbatch_size=mb, global_batch_size=batch,
                                                virtual_stages=v, schedule=schedule, sequence_parallel=sp,
                                                zero_stage=zero, recompute=recompute,
                                                overlap_grad_reduce=grad_overlap, placement=placement,
                                                tp_comm_overlap=tp_overlap, precision=precision, fp8_recipe=recipe,
                                                fp8_scaling=scaling,
                                                async_tensor_model_parallel_allreduce=tp_async,
                                                cp=cp, cp_comm=cp_comm, ep=ep, expert_tp=etp)
