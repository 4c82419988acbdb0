"""The search and context parallelism: cp is generated where it applies (divisors of GPUs / tp that keep
seq_length / (2 cp) whole; not for standard attention or encoder-decoder models), its layouts are pruned with
their own memory, and the closed-form estimate counts 1/cp of the work per rank."""

from __future__ import annotations

import dataclasses

from simcore.cost.memory import userbuffer_bytes
from simcore.domain.layout import Layout, Recompute
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.planning.estimate import Estimator
from simcore.planning.space import Space, context_parallel_sizes, enumerate_layouts, family_of
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

LLAMA = model_from_fields(MODEL_PRESETS["llama2-7b"])
H100 = NODE_PRESETS["dgx-h100"]


def test_cp_sizes_keep_whole_chunks_and_need_flash_decoders() -> None:
    assert context_parallel_sizes(dataclasses.replace(LLAMA, seq_length=24), 32) == (1, 2, 4)  # 24 % (2*8) != 0
    assert context_parallel_sizes(LLAMA, 16) == (1, 2, 4, 8, 16)
    assert context_parallel_sizes(model_from_fields(MODEL_PRESETS["gpt3-1.3b"]), 16) == (1,)  # standard attention
    assert context_parallel_sizes(model_from_fields(MODEL_PRESETS["t5-small"]), 16) == (1,)


def test_search_space_generates_cp_families() -> None:
    space = Space(tp=(2,), pp=(1,), zero_stage=(1,), recompute=(Recompute.NONE,), sequence_parallel=(True,),
                  microbatch_size=(1,), placement=("tp,dp,pp",))
    layouts = list(enumerate_layouts(LLAMA, 16, 8, 16, space))
    assert sorted({(lay.dp, lay.cp) for lay in layouts}) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert all(lay.num_gpus == 16 for lay in layouts)
    assert len({family_of(lay) for lay in layouts}) == 4
    pinned = list(enumerate_layouts(LLAMA, 16, 8, 16, dataclasses.replace(space, cp=(1,))))
    assert [(lay.dp, lay.cp) for lay in pinned] == [(8, 1)]


def test_estimate_counts_a_ranks_share_of_the_work() -> None:
    """At 32K tokens on 8 GPUs, CP 8 and DP 8 do the same work per GPU: the estimates are within 20%."""
    model = dataclasses.replace(LLAMA, seq_length=32768)
    estimator = Estimator(model, sized(H100, 8))
    dp = estimator.tokens_per_s(Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8))
    cp = estimator.tokens_per_s(Layout(dp=1, tp=1, pp=1, cp=8, microbatch_size=1, global_batch_size=8))
    assert 0.8 < cp / dp < 1.25


def test_tp_overlap_userbuffers_grow_with_the_sequence() -> None:
    """Transformer Engine's userbuffers: 12 buffers of (s/cp x b) x h 16-bit elements per GPU with
    tp_comm_overlap; 12 GiB at 128K tokens of h = 4096, and cp divides them."""
    model = dataclasses.replace(LLAMA, seq_length=131072)
    layout = Layout(dp=4, tp=8, pp=1, microbatch_size=1, global_batch_size=4, sequence_parallel=True,
                    tp_comm_overlap=True)
    assert userbuffer_bytes(model, layout) == 12 * 131072 * 4096 * 2
    assert userbuffer_bytes(model, dataclasses.replace(layout, tp_comm_overlap=False)) == 0.0
    with_buffers = simulate(Scenario(model, sized(H100, 32), layout)).metrics.peak_stage.memory
    without = simulate(Scenario(model, sized(H100, 32), dataclasses.replace(layout, tp_comm_overlap=False)))
    assert with_buffers.buffers - without.metrics.peak_stage.memory.buffers == 12 * 131072 * 4096 * 2
