"""The top layouts differ in something that matters: a layout that differs from a better-ranked one only in
placement, with equal figures, is folded into that row (which names its placement), and the rows that remain
still number top_k."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from simcore.domain.layout import Layout
from simcore.planning.search import fold_placements

BASE = Layout(dp=4, tp=2, pp=2, microbatch_size=1, global_batch_size=64)


def evaluation(index: int, tokens_per_s: float, memory: float = 10.0) -> SimpleNamespace:
    return SimpleNamespace(index=index, tokens_per_s=tokens_per_s, peak_memory_gib=memory)


def test_equal_figures_in_another_placement_fold_into_the_first() -> None:
    candidates = [BASE, replace(BASE, placement="dp,tp,pp"), replace(BASE, microbatch_size=2),
                  replace(BASE, placement="tp,pp,dp")]
    ordered = [evaluation(0, 100.0), evaluation(1, 100.0), evaluation(2, 90.0), evaluation(3, 80.0)]
    kept, folded = fold_placements(ordered, candidates, top_k=2)  # type: ignore[arg-type]
    assert [e.index for e in kept] == [0, 2]
    assert folded == {0: ["dp,tp,pp"]}


def test_a_placement_with_other_figures_keeps_its_row() -> None:
    candidates = [BASE, replace(BASE, placement="dp,tp,pp")]
    kept, folded = fold_placements([evaluation(0, 100.0), evaluation(1, 95.0)], candidates,  # type: ignore[arg-type]
                                   top_k=5)
    assert [e.index for e in kept] == [0, 1] and folded == {}
