"""Encoder-decoder (T5) and encoder-only (BERT) models: shapes, FLOPs, the encoder/decoder pipeline split, the
encoder output in pipeline traffic, stage imbalance, and memory without pipelining."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.compute.flops import layer_forward_matmul_flops, model_flops_per_iteration
from simcore.cost.partition import StageCosts, even_encoder_stages, partition, split_layers
from simcore.domain.layout import Layout, Partition, Recompute, validate_layout
from simcore.domain.model import Architecture, model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized
from topology.errors import SpecError

T5_100B = model_from_fields(MODEL_PRESETS["t5-100b"])
GPT_100B = model_from_fields(MODEL_PRESETS["gpt-100b"])
A100 = NODE_PRESETS["dgx-a100"]


def small_t5(**over: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "architecture": "encoder_decoder", "encoder_layers": 8, "decoder_layers": 8, "hidden_size": 1024,
        "num_attention_heads": 16, "ffn_hidden_size": 4096, "vocab_size": 32128, "seq_length": 512,
        "decoder_seq_length": 512, "tied_embeddings": True}
    fields.update(over)
    return fields


def run(model_fields: dict[str, object], gpus: int, **layout: object) -> Scenario:
    model = model_from_fields(model_fields)
    lay = Layout(**{"microbatch_size": 1, **layout})  # type: ignore[arg-type]
    return Scenario(model, sized(A100, gpus), lay)


# -- shapes and FLOPs ----------------------------------------------------------------------------------------


def test_comparison_pair_sizes() -> None:
    assert GPT_100B.total_parameters() == pytest.approx(101e9, rel=0.02)
    assert T5_100B.total_parameters() == pytest.approx(106e9, rel=0.02)
    assert T5_100B.tokens_per_sample == GPT_100B.tokens_per_sample == 2048
    assert T5_100B.architecture is Architecture.ENCODER_DECODER and T5_100B.num_layers == 72


def test_t5_v1_1_xxl_has_about_11b_parameters() -> None:
    # Published: 11B (13B with mT5's vocabulary); gated-GELU MLP, untied output layer, d_kv 64 with 64 heads.
    assert model_from_fields(MODEL_PRESETS["t5-v1_1-xxl"]).total_parameters() == pytest.approx(11.1e9, rel=0.05)
    assert model_from_fields(MODEL_PRESETS["t5-11b"]).total_parameters() == pytest.approx(11.3e9, rel=0.05)


def test_decoder_layer_flops_add_cross_attention_on_both_lengths() -> None:
    m = model_from_fields(small_t5(seq_length=512, decoder_seq_length=128))
    h, e, s = 1024, 512, 128
    enc, dec = layer_forward_matmul_flops(m, m.encoder_layer()), layer_forward_matmul_flops(m, m.decoder_layer())
    assert enc == 2 * e * 12 * h * h + 4 * e * e * h  # projections and MLP (12h² a token), scores and values
    self_part = 2 * s * 12 * h * h + 4 * s * s * h
    cross = 2 * s * 2 * h * h + 2 * e * 2 * h * h + 4 * s * e * h  # Q and output on s, K and V on e, core s x e
    assert dec == self_part + cross
    layout = Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=4)
    logits = 2 * s * h * 32128  # on the target tokens only
    assert model_flops_per_iteration(m, layout) == 3 * 4 * (8 * enc + 8 * dec + logits)


def test_encoder_decoder_fields_are_checked() -> None:
    with pytest.raises(SpecError) as err:
        model_from_fields({**small_t5(), "num_layers": 12})
    assert err.value.field == "model.num_layers"
    with pytest.raises(SpecError) as err:
        model_from_fields({k: v for k, v in small_t5().items() if k != "decoder_seq_length"})
    assert err.value.field == "model.decoder_seq_length"
    with pytest.raises(SpecError) as err:
        model_from_fields({**MODEL_PRESETS["gpt3-125m"], "decoder_layers": 2})
    assert err.value.field == "model.decoder_layers"


@pytest.mark.parametrize(("layout", "field"), [
    (dict(pp=4, encoder_pipeline_stages=4), "layout.encoder_pipeline_stages"),  # no decoder stage left
    (dict(pp=4, encoder_pipeline_stages=0), "layout.encoder_pipeline_stages"),
    (dict(pp=1, encoder_pipeline_stages=1), "layout.encoder_pipeline_stages"),
    (dict(pp=2, schedule="interleaved_1f1b", virtual_stages=2), "layout.schedule"),
])
def test_encoder_decoder_layout_rules(layout: dict[str, object], field: str) -> None:
    model = model_from_fields(small_t5())
    fields: dict[str, object] = {"dp": 1, "tp": 1, "microbatch_size": 1, "global_batch_size": 8, **layout}
    if "schedule" in fields:
        from simcore.domain.layout import Schedule
        fields["schedule"] = Schedule(str(fields["schedule"]))
    lay = Layout(**fields)  # type: ignore[arg-type]
    with pytest.raises(SpecError) as err:
        validate_layout(lay, model, lay.num_gpus)
    assert err.value.field == field


# -- partitions ----------------------------------------------------------------------------------------------


def test_even_partition_splits_each_stack_by_count() -> None:
    costs = StageCosts(layer={T5_100B.encoder_layer(): 1.0, T5_100B.decoder_layer(): 1.4}, embedding=0.01,
                       decoder_embedding=0.01, logits=0.2)
    chunks, encoder_stages = partition(T5_100B, 8, 1, Partition.EVEN, costs)
    assert encoder_stages == even_encoder_stages(T5_100B, 8) == 4
    assert [n for runs in chunks for _, n in runs] == [9] * 8
    assert [runs[0][0].kind for runs in chunks] == ["encoder"] * 4 + ["decoder"] * 4


@pytest.mark.slow
def test_balanced_partition_minimises_the_slowest_stage() -> None:
    enc, dec = T5_100B.encoder_layer(), T5_100B.decoder_layer()
    costs = StageCosts(layer={enc: 1.0, dec: 1.4}, embedding=0.05, decoder_embedding=0.05, logits=0.2)
    chunks, e = partition(T5_100B, 8, 1, Partition.BALANCED, costs)
    counts = [n for runs in chunks for _, n in runs]
    assert sum(counts[:e]) == 36 and sum(counts[e:]) == 36
    extras = [0.05] + [0.0] * (e - 1) + [0.05] + [0.0] * (8 - e - 2) + [0.2]
    weights = [1.0] * e + [1.4] * (8 - e)
    slowest = max(n * w + x for n, w, x in zip(counts, weights, extras))
    # Brute force: every encoder stage count, every whole-layer split of each stack.
    best = min(max(_min_max(36, 1.0, [0.05] + [0.0] * (k - 1)),
                   _min_max(36, 1.4, [0.05] + [0.0] * (8 - k - 2) + [0.2] if 8 - k > 1 else [0.25]))
               for k in range(1, 8))
    assert slowest == pytest.approx(best)
    assert slowest < 9 * 1.4  # the even split's decoder stages


def _min_max(n: int, w: float, extras: list[float]) -> float:
    """The smallest possible costliest part when n layers of cost w go to len(extras) parts of at least one."""
    if len(extras) == 1:
        return n * w + extras[0]
    return min(max(c * w + extras[0], _min_max(n - c, w, extras[1:])) for c in range(1, n - len(extras) + 2))


def test_balanced_keeps_the_even_split_of_a_uniform_gpt() -> None:
    layer = GPT_100B.main_layer()
    costs = StageCosts(layer={layer: 1.0}, embedding=0.01, decoder_embedding=0.01, logits=0.3)
    chunks, _ = partition(GPT_100B, 8, 1, Partition.BALANCED, costs)
    assert [runs[0][1] for runs in chunks] == split_layers(80, 8)


# -- simulated: pipeline traffic, imbalance, memory ------------------------------------------------------------


def test_messages_between_decoder_stages_carry_the_encoder_output() -> None:
    # 4 stages: 2 encoder and 2 decoder; one microbatch, so every message is one activation or gradient.
    fields = small_t5(seq_length=512, decoder_seq_length=512)
    t5 = run(fields, 4, dp=1, tp=1, pp=4, global_batch_size=1, encoder_pipeline_stages=2,
             pipeline_partition=Partition.EVEN)
    gpt_fields = {"architecture": "decoder_only", "num_layers": 16, "hidden_size": 1024,
                  "num_attention_heads": 16, "vocab_size": 32128, "seq_length": 512}
    gpt = run(gpt_fields, 4, dp=1, tp=1, pp=4, global_batch_size=1)
    t5_result, gpt_result = simulate(t5).metrics, simulate(gpt).metrics
    assert [dict(s.layers) for s in t5_result.stages][2] == {"decoder": 4, "embedding": 1}
    chunk_bytes = [c.input_bytes for c in _workload(t5).chunks]
    hidden = 512 * 1024 * 2
    # encoder -> encoder: hidden states; encoder -> first decoder stage: the encoder output; decoder -> decoder:
    # target hidden states plus the encoder output.
    assert chunk_bytes == [0.0, hidden, hidden, 2 * hidden]
    assert chunk_bytes[3] > max(c.input_bytes for c in _workload(gpt).chunks)
    # The bytes the simulation sent: one activation and one gradient across each of the 3 stage boundaries, and
    # each stage holding a copy of the tied embedding sends its gradient in the embedding all-reduce.
    def embedding_bytes(scenario: Scenario) -> float:
        w = _workload(scenario)
        return len(w.embedding_sync_ranks) * w.embedding_sync_bytes

    assert _workload(t5).embedding_sync_ranks == (0, 2, 3)
    assert t5_result.communication_bytes["pp"] == pytest.approx(2 * (hidden + hidden + 2 * hidden)
                                                                + embedding_bytes(t5))
    assert gpt_result.communication_bytes["pp"] == pytest.approx(2 * 3 * hidden + embedding_bytes(gpt))


def _workload(scenario: Scenario):  # type: ignore[no-untyped-def]
    from simcore.cost.workload import build_workload
    from topology.hardware import GPUS
    return build_workload(scenario.model, scenario.layout, GPUS[scenario.cluster.gpu], None, None, True)


def _busy_spread(scenario: Scenario) -> float:
    busy = [s.busy_fraction for s in simulate(scenario).metrics.stages]
    return max(busy) - min(busy)


def test_even_split_t5_stages_are_less_balanced_than_gpt() -> None:
    t5 = Scenario(T5_100B, sized(A100, 64), Layout(dp=1, tp=8, pp=8, microbatch_size=1, global_batch_size=16,
                                                     recompute=Recompute.FULL, pipeline_partition=Partition.EVEN))
    gpt = dataclasses.replace(t5, model=GPT_100B, layout=dataclasses.replace(t5.layout, pipeline_partition=None))
    assert _busy_spread(t5) > 2 * _busy_spread(gpt)
    balanced = dataclasses.replace(t5, layout=dataclasses.replace(t5.layout, pipeline_partition=Partition.BALANCED))
    assert _busy_spread(balanced) < _busy_spread(t5)
    assert simulate(balanced).metrics.iteration_time_s <= simulate(t5).metrics.iteration_time_s


def test_t5_11b_fits_without_pipelining_and_t5_100b_does_not() -> None:
    t5_11b = model_from_fields(MODEL_PRESETS["t5-11b"])
    layout = Layout(dp=4, tp=8, pp=1, microbatch_size=1, global_batch_size=32, recompute=Recompute.FULL)
    outcome = simulate(Scenario(t5_11b, sized(A100, 32), layout))
    assert max(s.memory.total for s in outcome.metrics.stages) < 80 * 2**30
    for tp in (1, 2, 4, 8):
        lay = Layout(dp=32 // tp, tp=tp, pp=1, microbatch_size=1, global_batch_size=32, recompute=Recompute.FULL)
        stages = simulate(Scenario(T5_100B, sized(A100, 32), lay)).metrics.stages
        assert stages[0].memory.total > 80 * 2**30  # ZeRO 0: 16 bytes a parameter over tp ranks


def test_bert_is_one_bidirectional_stack() -> None:
    bert = model_from_fields(MODEL_PRESETS["bert-large"])
    assert bert.total_parameters() == pytest.approx(335e6, rel=0.03)
    layout = Layout(dp=2, tp=2, pp=2, microbatch_size=4, global_batch_size=32)
    stages = simulate(Scenario(bert, sized(A100, 8), layout)).metrics.stages
    assert [dict(s.layers) for s in stages] == [{"transformer": 12, "embedding": 1}, {"transformer": 12, "logits": 1}]


def test_full_fidelity_agrees_with_representative_on_t5() -> None:
    from simcore.domain.layout import Fidelity
    scenario = run(small_t5(seq_length=512, decoder_seq_length=128), 32, dp=4, tp=2, pp=4, microbatch_size=2,
                   global_batch_size=32, zero_stage=1, overlap_grad_reduce=True, sequence_parallel=True)
    full = dataclasses.replace(scenario, fidelity=Fidelity.FULL)
    assert simulate(full).metrics.iteration_time_s == pytest.approx(simulate(scenario).metrics.iteration_time_s,
                                                                    rel=1e-9)


def test_one_stage_does_the_work_of_the_pipeline_stages_together() -> None:
    # Both embeddings, all layers and the logits: a single stage's passes add up to the split stages' passes.
    fields = small_t5(seq_length=512, decoder_seq_length=128)
    one = _workload(run(fields, 1, dp=1, tp=1, pp=1, global_batch_size=1)).chunks
    four = _workload(run(fields, 4, dp=1, tp=1, pp=4, global_batch_size=1)).chunks
    assert one[0].forward_compute_s == pytest.approx(sum(c.forward_compute_s for c in four), rel=1e-12)
    assert one[0].backward_compute_s == pytest.approx(sum(c.backward_compute_s for c in four), rel=1e-12)


def test_unequal_lengths_give_each_boundary_its_own_message() -> None:
    fields = small_t5(seq_length=512, decoder_seq_length=128)
    chunks = _workload(run(fields, 4, dp=1, tp=1, pp=4, global_batch_size=1, encoder_pipeline_stages=2,
                           pipeline_partition=Partition.EVEN)).chunks
    row = 1024 * 2  # one token's hidden state, 16-bit
    assert [c.input_bytes for c in chunks] == [0.0, 512 * row, 512 * row, (128 + 512) * row]


def test_the_decoder_embedding_ends_with_its_own_tensor_parallel_collective() -> None:
    from simcore.cost.comm.collectives import CollectiveModel
    from simcore.cost.workload import build_workload
    from simcore.domain.layout import CollectiveAlgorithm
    from simcore.domain.placement import place
    from topology import GPUS, Router, build_cluster
    scenario = run(small_t5(seq_length=512, decoder_seq_length=128), 8, dp=1, tp=2, pp=4, global_batch_size=4,
                   encoder_pipeline_stages=2, pipeline_partition=Partition.EVEN)
    cluster = build_cluster(scenario.cluster)
    chunks = build_workload(scenario.model, scenario.layout, GPUS[scenario.cluster.gpu],
                            place(1, 2, 4, scenario.layout.placement, 8),
                            CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.RING)).chunks
    first_decoder, second_decoder = chunks[2], chunks[3]
    assert first_decoder.embeds_target and not second_decoder.embeds_target
    target = 128 * 1024 * 2  # the decoder embedding's output, all-reduced over the 2 tensor ranks
    assert first_decoder.tp_bytes_forward - second_decoder.tp_bytes_forward == pytest.approx(target)
    assert first_decoder.forward_tp_s > second_decoder.forward_tp_s
