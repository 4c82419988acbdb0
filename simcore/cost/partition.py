"""How the layers are cut into pipeline stages (model chunks), and for encoder-decoder models which stages
hold the encoder.

Two partitions:
- `even`: layers split by count, what Megatron does. A single stack is cut into pp * virtual_stages chunks of
  equal size, the extra layers going to the middle stages first (the first stage also embeds, the last also
  computes the logits). An encoder-decoder model puts its encoder on the first `encoder_pipeline_stages` stages
  and its decoder on the rest (Megatron's split rank), each stack split by count; the default number of encoder
  stages follows the layer counts (pp * encoder_layers / all layers, rounded).
- `balanced`: split by the simulated cost of each stage (its layers' forward, backward and recomputation, plus
  the embedding and the logits where they are), so that the slowest stage is as fast as it can be, with whole
  layers per stage; for encoder-decoder models the number of encoder stages is chosen the same way unless the
  layout gives it. Where the even split is already as good, it is kept.

The default is `balanced` for encoder-decoder models (the contract's default for encoder_pipeline_stages: chosen to
balance stage cost) and `even` for single-stack models (Megatron's split, which the published runs used).

On a heterogeneous cluster each model piece is costed on the GPU that runs it (simcore/cost/per_gpu.py passes one
`StageCosts` per piece): `balanced` then gives a faster GPU more layers, so that every stage takes about as long.

The costs are the cost model's compute times per microbatch on the GPU (forward, backward and recomputation);
tensor-parallel time is left out so that the split is known before any network exists (the search prunes by
memory with it), and it follows the compute closely (the same collectives per layer of a type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcore.cost.compute.kernel_time import ops_time
from simcore.cost.compute.kernels import (
    ATTENTION_CORE,
    Op,
    embedding_forward_ops,
    layer_forward_ops,
    logits_forward_ops,
)
from simcore.cost.mtp import mtp_forward_ops
from simcore.cost.parameters import FITTED, CostParameters
from simcore.domain.layout import Layout, Partition
from simcore.domain.model import LayerType, ModelShape
from topology.hardware import GpuSpec


@dataclass(frozen=True, slots=True)
class StageCosts:
    """Seconds per microbatch (forward + backward + recomputation) of what a stage can hold."""

    layer: dict[LayerType, float]
    embedding: float  # one embedding lookup (the encoder's, or the decoder's on its first stage)
    decoder_embedding: float
    logits: float  # the last stage's output work: the logits, and the multi-token prediction depths if any


Chunks = list[list[tuple[LayerType, int]]]  # per virtual stage: its layers in order, as (type, count) runs


def split_layers(num_layers: int, parts: int) -> list[int]:
    """Layers by count: equal shares, the remainder to the middle parts first, then the first and the last."""
    base, extra = divmod(num_layers, parts)
    counts = [base] * parts
    order = list(range(1, parts - 1)) + [0, parts - 1] if parts > 2 else list(range(parts))
    for i in order[:extra]:
        counts[i] += 1
    return counts


def even_encoder_stages(model: ModelShape, pp: int) -> int:
    """Encoder stages in proportion to the encoder's share of the layers, at least one stage for each stack."""
    share = round(pp * model.encoder_layers / model.num_layers)
    return max(1, pp - model.decoder_layers, min(pp - 1, model.encoder_layers, share))


def default_partition(model: ModelShape) -> Partition:
    return Partition.BALANCED if model.encoder_decoder else Partition.EVEN


def stage_costs(model: ModelShape, b: int, t: int, sequence_parallel: bool, recompute: str, gpu: GpuSpec,
                params: CostParameters) -> StageCosts:
    """Compute seconds per microbatch of each layer type (forward, backward and recomputation: `recompute` is
    "none", "selective" or "full"), of an embedding lookup and of the logits, on one tensor-parallel rank."""

    def both(ops: tuple[Op, ...]) -> float:
        return ops_time(ops, gpu, params) + ops_time(tuple(op.backward() for op in ops), gpu, params)

    layers = {}
    for layer, _ in model.layer_stacks():
        ops = layer_forward_ops(model, b, t, sequence_parallel, layer)
        redo = ops if recompute == "full" else tuple(
            op for op in ops if op.name in ATTENTION_CORE) if recompute == "selective" else ()
        layers[layer] = both(ops) + ops_time(redo, gpu, params)
    decoder_tokens = model.decoder_seq_length or model.seq_length
    logits = both(logits_forward_ops(model, b, t, sequence_parallel))
    if model.mtp_layers:  # the last stage also runs the multi-token prediction depths (simcore/cost/mtp.py)
        logits += model.mtp_layers * (layers[model.mtp_layer()]
                                      + both(mtp_forward_ops(model, b, t, sequence_parallel)))
    return StageCosts(layer=layers, embedding=both(embedding_forward_ops(model, b, t)),
                      decoder_embedding=both(embedding_forward_ops(model, b, t, decoder_tokens)), logits=logits)


def partition(model: ModelShape, pp: int, virtual_stages: int, mode: Partition | None,
              costs: StageCosts | Sequence[StageCosts], encoder_stages: int | None = None,
              stage_layers: Sequence[int] | None = None) -> tuple[Chunks, int]:
    """The layers of each virtual stage, and the number of encoder stages (0 for a single-stack model).
    `costs`: one for every piece, or one per piece (in piece order) where pieces run on different GPUs.
    `stage_layers`, when given (validated by the layout's rules), is the split itself."""
    if stage_layers is not None:
        return given_split(model, stage_layers)
    mode = mode or default_partition(model)
    chunks = pp * virtual_stages
    per = [costs] * chunks if isinstance(costs, StageCosts) else list(costs)
    if not model.encoder_decoder:
        stacks = model.layer_stacks()
        extras = _extras(chunks, per[0].embedding, per[-1].logits)
        if len(stacks) == 1:
            (layer, count), = stacks
            counts = _split(count, [c.layer[layer] for c in per], extras, mode)
            return [[(layer, n)] for n in counts], 0
        # dense layers then MoE layers (first_dense_layers): cut by count at the mean layer cost, in order
        total = sum(n for _, n in stacks)
        means = [sum(n * c.layer[layer] for layer, n in stacks) / total for c in per]
        return _runs(stacks, _split(total, means, extras, mode)), 0
    enc, dec = model.encoder_layer(), model.decoder_layer()
    if pp == 1:
        return [[(enc, model.encoder_layers), (dec, model.decoder_layers)]], 1
    options = [encoder_stages] if encoder_stages is not None else (
        [even_encoder_stages(model, pp)] if mode is Partition.EVEN else
        [e for e in range(1, pp) if e <= model.encoder_layers and pp - e <= model.decoder_layers])
    best: tuple[float, Chunks, int] | None = None
    for e in options:
        enc_extras = _extras(e, per[0].embedding, 0.0)
        dec_extras = _extras(pp - e, per[e].decoder_embedding, per[pp - 1].logits)
        enc_weights = [c.layer[enc] for c in per[:e]]
        dec_weights = [c.layer[dec] for c in per[e:pp]]
        enc_counts = _split(model.encoder_layers, enc_weights, enc_extras, mode)
        dec_counts = _split(model.decoder_layers, dec_weights, dec_extras, mode)
        slowest = max(max(_stage_costs(enc_counts, enc_weights, enc_extras)),
                      max(_stage_costs(dec_counts, dec_weights, dec_extras)))
        if best is None or slowest < best[0] * (1 - 1e-12):
            best = (slowest, [[(enc, n)] for n in enc_counts] + [[(dec, n)] for n in dec_counts], e)
    assert best is not None
    return best[1], best[2]


def _runs(stacks: Sequence[tuple[LayerType, int]], counts: Sequence[int]) -> Chunks:
    """Consecutive layers of `stacks` (in order) cut into chunks of `counts` layers, as runs per chunk."""
    sequence = [layer for layer, n in stacks for _ in range(n)]
    chunks: Chunks = []
    start = 0
    for n in counts:
        runs: list[tuple[LayerType, int]] = []
        for layer in sequence[start:start + n]:
            if runs and runs[-1][0] == layer:
                runs[-1] = (layer, runs[-1][1] + 1)
            else:
                runs.append((layer, 1))
        chunks.append(runs)
        start += n
    return chunks


def given_split(model: ModelShape, counts: Sequence[int]) -> tuple[Chunks, int]:
    """The layers of each virtual stage as listed; an encoder-decoder model's encoder fills the first chunks."""
    if not model.encoder_decoder:
        return _runs(model.layer_stacks(), counts), 0
    enc, dec = model.encoder_layer(), model.decoder_layer()
    chunks: Chunks = []
    encoder_left, stages = model.encoder_layers, 0
    for n in counts:
        runs = []
        if encoder_left:
            take = min(n, encoder_left)
            runs.append((enc, take))
            encoder_left -= take
            stages += 1
        if n - sum(k for _, k in runs):
            runs.append((dec, n - sum(k for _, k in runs)))
        chunks.append(runs)
    return chunks, stages


def _extras(parts: int, first: float, last: float) -> list[float]:
    extras = [0.0] * parts
    extras[0] += first
    extras[-1] += last
    return extras


def _stage_costs(counts: Sequence[int], weights: Sequence[float], extras: Sequence[float]) -> list[float]:
    return [n * w + x for n, w, x in zip(counts, weights, extras)]


def _split(n: int, weights: list[float], extras: list[float], mode: Partition) -> list[int]:
    """`weights`: one layer's cost on each part (the GPU that runs it)."""
    even = split_layers(n, len(extras))
    if mode is Partition.EVEN or min(weights) <= 0:
        return even
    balanced = _balanced(n, weights, extras)
    if max(_stage_costs(even, weights, extras)) <= max(_stage_costs(balanced, weights, extras)) * (1 + 1e-12):
        return even
    return balanced


def _balanced(n: int, weights: list[float], extras: list[float]) -> list[int]:
    """Whole layers per part (at least one each) minimising the costliest part: the smallest cap at which the
    parts can hold all n layers, then layers taken off the costliest parts until exactly n remain. A part's
    layers cost `weights[i]` each on it."""
    parts = len(extras)

    most = n - parts + 1  # a part holds at most this many layers (every other part holds one)

    def fit(cap: float) -> list[int]:
        # Clipped at `most`: a part whose extra cost is small next to the others' (a huge vocabulary on the last
        # stage) would otherwise fit billions of layers, all taken off again one at a time below.
        return [min(most, int((cap - x) / w + 1e-9)) for w, x in zip(weights, extras)]

    caps = sorted({x + c * w for w, x in zip(weights, extras) for c in range(1, n - parts + 2)})
    lo, hi = 0, len(caps) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        counts = fit(caps[mid])
        if min(counts) >= 1 and sum(counts) >= n:
            hi = mid
        else:
            lo = mid + 1
    counts = fit(caps[lo])
    for _ in range(sum(counts) - n):
        costs = [(c * w + x, i) for i, (c, w, x) in enumerate(zip(counts, weights, extras)) if c > 1]
        counts[max(costs)[1]] -= 1
    return counts


def layer_partition(model: ModelShape, layout: Layout, gpu: GpuSpec,
                    params: CostParameters = FITTED) -> tuple[Chunks, int]:
    """The layout's layers per virtual stage and its encoder stage count (simcore/partition.py); the last piece
    also holds the multi-token prediction depths' layers (Megatron-Core puts them on the last stage)."""
    costs = stage_costs(model, layout.microbatch_size, layout.tp, layout.sequence_parallel, str(layout.recompute),
                        gpu, params)
    chunks, encoder_stages = partition(model, layout.pp, layout.shape.pieces // layout.pp, layout.pipeline_partition,
                                       costs, layout.encoder_pipeline_stages, layout.stage_layers)
    if model.mtp_layers:
        last, mtp = chunks[-1], model.mtp_layer()
        chunks[-1] = last[:-1] + [(mtp, last[-1][1] + model.mtp_layers)] if last[-1][0] == mtp else \
            last + [(mtp, model.mtp_layers)]
    return chunks, encoder_stages
