"""The frontier of a search (simcore.planning.frontier): which candidates can still win by their kind's
measured error, which it simulates next, and when the best simulated is proven."""

from __future__ import annotations

import pytest

from simcore.domain.layout import Layout, Schedule
from simcore.planning.frontier import MIN_MARGIN, PRIOR, Frontier, KindError, error_kind


def speed_score(i: int, tokens_per_s: float) -> float:
    return -tokens_per_s


def frontier(estimates: list[float], kinds: list[str], costs: list[float] | None = None,
             refused: set[int] = frozenset()) -> Frontier:  # type: ignore[assignment]
    return Frontier(estimates, kinds, [0] * len(estimates), speed_score,
                    (lambda i: costs[i]) if costs else (lambda i: 1.0),
                    lambda i: "over the limit" if i in refused else None)


def test_a_kind_not_yet_simulated_has_the_prior_bound_and_one_simulated_a_margin_around_it() -> None:
    error = KindError()
    assert (error.low, error.high) == PRIOR
    error.ratios.append(0.9)
    assert error.low == pytest.approx(0.9 * 0.9) and error.high == pytest.approx(0.9 * 1.1)
    error.ratios.extend([0.92] * 99)
    assert error.margin == MIN_MARGIN  # 10% / sqrt(100) is under the floor
    # An estimate seen too high is not trusted to be too high for the rest of its kind, however often it was seen so.
    optimistic = KindError([1.3, 1.25, 1.28])
    assert optimistic.low == 1.0
    assert KindError([1.2] * 100).low == 1.0


def test_the_best_is_proven_when_no_bound_beats_it() -> None:
    f = frontier([100.0, 99.0, 50.0, 40.0], ["a", "a", "b", "b"])
    first = f.choose(1)
    assert first == [0]
    f.learn(0, 100.0, -100.0)  # the estimate was exact
    assert f.can_win(1)  # 99 / 0.9 beats 100: the margin of one sample
    assert not f.can_win(3) and f.can_win(2) is False  # kind b's prior: 50 / 0.8 = 62.5 < 100
    assert f.choose() == [1]
    f.learn(1, 99.0, -99.0)
    assert f.choose() == [] and f.could_win() == 0


def test_a_kind_estimated_too_low_gets_more_simulated() -> None:
    # kind b is estimated at half its speed: its first simulation widens its bound, and its others follow.
    f = frontier([100.0, 90.0, 85.0, 84.0, 83.0], ["a", "b", "b", "b", "b"])
    for i in f.choose(2):
        truth = 100.0 if i == 0 else 2 * f.estimates[i]
        f.learn(i, truth, -truth)
    assert f.best_score == -180.0
    assert f.can_win(2) and f.can_win(4)  # 83 / (0.5 x 0.9) beats 180
    assert set(f.choose(4)) == {2, 3, 4}


def test_cheaper_candidates_of_equal_chance_go_first_and_screened_ones_are_reported() -> None:
    f = frontier([100.0, 100.0, 100.0], ["a", "b", "c"], costs=[10.0, 1.0, 5.0], refused={2})
    assert f.choose(3) == [1, 0]
    assert f.refused == [(2, "over the limit")]


def test_error_kinds() -> None:
    plain = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16)
    assert error_kind(plain) == ("1F1B", plain.placement)
    piped = Layout(dp=2, tp=2, pp=2, microbatch_size=1, global_batch_size=16, virtual_stages=2,
                   schedule=Schedule.INTERLEAVED_1F1B)
    assert error_kind(piped)[0] == "interleaved"
    assert error_kind(Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16, zero_stage=3))[0] == "ZeRO-3"


def test_a_ratio_below_its_kinds_bound_widens_the_bound_for_good() -> None:
    error = KindError([1.0] * 16)  # its low end is the ratios seen less 2.5%
    before = error.low
    assert before == pytest.approx(1.0 * (1 - 0.1 / 4))
    assert error.learn(1.0) is False and error.misses == 0
    assert error.learn(0.9) is True  # below 0.975: a miss
    after = error.low
    # the miss's own ratio less twice the margin: one base margin more for the miss
    assert after == pytest.approx(0.9 * (1 - 2 * max(MIN_MARGIN, 0.1 / 18 ** 0.5)))
    for _ in range(200):  # later samples, however many and however close, never narrow it again
        assert error.learn(0.95) is False
        assert error.low <= after
    assert error.misses == 1


def test_a_miss_during_a_search_brings_back_candidates_pruned_with_the_narrower_bound() -> None:
    # Kind a's first eight estimates are exact; candidate 9 (estimate 92) cannot beat the best (100) with the bound
    # they give. Candidate 8, also of kind a, turns out 15% faster than its estimate: a miss, and 9 can win again.
    estimates = [100.0, 99.9, 99.8, 99.7, 99.6, 99.5, 99.4, 99.3, 97.0, 92.0]
    f = frontier(estimates, ["a"] * len(estimates))
    assert f.choose(8) == list(range(8))
    for i in range(8):
        f.learn(i, estimates[i], -estimates[i])
    assert f.errors["a"].low == pytest.approx(1 - 0.1 / 8 ** 0.5) and not f.can_win(9)
    assert f.choose() == [8]  # 97 / 0.965 beats 100
    truth = 97.0 * 1.15
    f.learn(8, truth, -truth)
    assert f.errors["a"].misses == 1
    # 92 / (0.87 x (1 - 2 x 0.1 / 3)) beats 111.55: re-checked against the widened bound (the ratio seen less the
    # margin of nine samples alone, 92 / (0.87 x (1 - 0.1 / 3)) = 109.4, would not)
    assert f.can_win(9)
    assert f.could_win() == 1 and f.choose() == [9]
    assert f.report()[0].exceeded == 1
