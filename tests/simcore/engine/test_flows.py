"""Bandwidth sharing: exact timelines on small cases, max-min fairness, and invariants of progressive filling."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.cost.comm.patterns import FlowPattern
from simcore.engine.clock import Clock
from simcore.engine.flows import FlowNetwork, water_fill

MB = 1e6
GB_PER_S = 1e9
REL = 1e-12


def on(*links: int, loads: Sequence[float] | None = None, latency_s: float = 0.0) -> FlowPattern:
    return FlowPattern(tuple(links), tuple(loads) if loads is not None else (1.0,) * len(links), latency_s)


class Timeline:
    """A FlowNetwork plus the finish time of every transfer, by name."""

    def __init__(self, capacity: Sequence[float]) -> None:
        self.clock = Clock()
        self.net = FlowNetwork(self.clock, list(capacity))
        self.done: dict[str, float] = {}

    def start(self, name: str, pattern: FlowPattern, size: float, at_s: float = 0.0) -> None:
        def finish() -> None:
            self.done[name] = self.clock.now

        if at_s > 0:
            self.clock.call_in(at_s, self.net.start, pattern, size, finish)
        else:
            self.net.start(pattern, size, finish)

    def run(self) -> dict[str, float]:
        self.clock.run()
        return self.done


def test_two_equal_transfers_on_one_link_end_together_at_2ms() -> None:
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0), 1 * MB)
    t.start("b", on(0), 1 * MB)
    done = t.run()
    assert done["a"] == pytest.approx(2e-3, rel=REL)
    assert done["b"] == pytest.approx(2e-3, rel=REL)


def test_small_and_large_transfer_end_at_1ms_and_2ms() -> None:
    # Both run at 0.5 GB/s until the small one ends (0.5 MB at 1 ms); the large one has 1 MB left at 1 GB/s.
    t = Timeline([1 * GB_PER_S])
    t.start("small", on(0), 0.5 * MB)
    t.start("large", on(0), 1.5 * MB)
    done = t.run()
    assert done["small"] == pytest.approx(1e-3, rel=REL)
    assert done["large"] == pytest.approx(2e-3, rel=REL)


def test_a_transfer_that_starts_later_shares_from_then_on() -> None:
    # a alone for 0.5 ms: 0.5 MB done. Then both at 0.5 GB/s: a's last 0.5 MB takes 1 ms (ends 1.5 ms), by when
    # b has 0.5 MB done; b's last 0.5 MB runs alone at 1 GB/s: 0.5 ms, ends at 2 ms.
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0), 1 * MB)
    t.start("b", on(0), 1 * MB, at_s=0.5e-3)
    done = t.run()
    assert done["a"] == pytest.approx(1.5e-3, rel=REL)
    assert done["b"] == pytest.approx(2.0e-3, rel=REL)


def test_a_transfer_alone_is_not_slowed_by_one_that_has_ended() -> None:
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0), 1 * MB)
    t.start("b", on(0), 1 * MB, at_s=3e-3)
    done = t.run()
    assert done["a"] == pytest.approx(1e-3, rel=REL)
    assert done["b"] == pytest.approx(4e-3, rel=REL)


def test_two_link_path_runs_at_the_slower_link() -> None:
    t = Timeline([1 * GB_PER_S, 0.25 * GB_PER_S])
    t.start("a", on(0, 1), 1 * MB)
    assert t.run()["a"] == pytest.approx(4e-3, rel=REL)


def test_load_factor_scales_the_rate() -> None:
    # A pattern that moves 2 bytes over the link per unit of progress progresses at half the link's rate.
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0, loads=[2.0]), 1 * MB)
    assert t.run()["a"] == pytest.approx(2e-3, rel=REL)


def test_latency_delays_completion_by_exactly_the_latency() -> None:
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0, latency_s=0.25e-3), 1 * MB)
    assert t.run()["a"] == pytest.approx(1.25e-3, rel=REL)


def test_latency_delays_when_the_transfer_starts_sharing() -> None:
    # b enters the link only after its 0.5 ms latency: the same timeline as a transfer started at 0.5 ms.
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0), 1 * MB)
    t.start("b", on(0, latency_s=0.5e-3), 1 * MB)
    done = t.run()
    assert done["a"] == pytest.approx(1.5e-3, rel=REL)
    assert done["b"] == pytest.approx(2.0e-3, rel=REL)


def test_empty_transfer_completes_at_once() -> None:
    t = Timeline([1 * GB_PER_S])
    t.start("a", on(0), 0.0)
    assert t.run()["a"] == 0.0


# -- max-min fairness --------------------------------------------------------------------------------------

def test_water_fill_classic_max_min_example() -> None:
    # link 0 (capacity 1) carries A and B; link 1 (capacity 2) carries A and C. Link 0 saturates first at
    # 0.5 each; C then takes what A leaves on link 1: 2 - 0.5 = 1.5.
    rates = water_fill([on(0, 1), on(0), on(1)], [1.0, 2.0])
    assert rates == pytest.approx([0.5, 0.5, 1.5], rel=REL)


def test_water_fill_three_flows_on_a_chain() -> None:
    # The parking-lot case: A crosses both links of capacity 1, B and C one each: everyone gets 0.5.
    assert water_fill([on(0, 1), on(0), on(1)], [1.0, 1.0]) == pytest.approx([0.5, 0.5, 0.5], rel=REL)


def test_max_min_timeline_on_two_links() -> None:
    # The classic example as transfers: A and B share link 0 (1 GB/s) at 0.5 GB/s; C runs at 1.5 GB/s on link 1
    # (2 GB/s) and its 1.5 MB end at 1 ms. Link 0 stays the bottleneck of A and B: both end at 2 ms.
    t = Timeline([1 * GB_PER_S, 2 * GB_PER_S])
    t.start("A", on(0, 1), 1 * MB)
    t.start("B", on(0), 1 * MB)
    t.start("C", on(1), 1.5 * MB)
    done = t.run()
    assert done["C"] == pytest.approx(1e-3, rel=REL)
    assert done["A"] == pytest.approx(2e-3, rel=REL)
    assert done["B"] == pytest.approx(2e-3, rel=REL)


def test_a_freed_bottleneck_speeds_up_the_others() -> None:
    # Link 0 (1 GB/s): A and B; link 1 (1 GB/s): A and C. All at 0.5 GB/s. B (0.5 MB) ends at 1 ms; then A and C
    # still share link 1 at 0.5 GB/s: A (1 MB) ends at 2 ms; C (2 MB) has 1 MB left, alone at 1 GB/s: 3 ms.
    t = Timeline([1 * GB_PER_S, 1 * GB_PER_S])
    t.start("A", on(0, 1), 1 * MB)
    t.start("B", on(0), 0.5 * MB)
    t.start("C", on(1), 2 * MB)
    done = t.run()
    assert done["B"] == pytest.approx(1e-3, rel=REL)
    assert done["A"] == pytest.approx(2e-3, rel=REL)
    assert done["C"] == pytest.approx(3e-3, rel=REL)


@st.composite
def flow_problems(draw: st.DrawFn) -> tuple[list[FlowPattern], list[float]]:
    n_links = draw(st.integers(1, 6))
    capacity = draw(st.lists(st.floats(0.1, 100.0), min_size=n_links, max_size=n_links))
    n_groups = draw(st.integers(1, 8))
    patterns = []
    for _ in range(n_groups):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True))
        loads = draw(st.lists(st.floats(0.05, 4.0), min_size=len(links), max_size=len(links)))
        patterns.append(FlowPattern(tuple(links), tuple(loads)))
    return patterns, capacity


@settings(max_examples=300, deadline=None)
@given(flow_problems())
def test_water_fill_respects_capacity_and_gives_everyone_a_rate(problem: tuple[list[FlowPattern], list[float]]) -> None:
    patterns, capacity = problem
    rates = water_fill(patterns, capacity)
    assert len(rates) == len(patterns)
    assert all(rate > 0 for rate in rates)
    used = [0.0] * len(capacity)
    for pattern, rate in zip(patterns, rates):
        for link, load in zip(pattern.links, pattern.loads):
            used[link] += load * rate
    for link, cap in enumerate(capacity):
        assert used[link] <= cap * (1 + 1e-9)
    # Max-min fair: every group has a saturated link on which no other group runs faster.
    for i, (pattern, rate) in enumerate(zip(patterns, rates)):
        assert any(
            used[link] >= capacity[link] * (1 - 1e-9)
            and all(rates[j] <= rate * (1 + 1e-9) for j, other in enumerate(patterns) if link in other.links)
            for link in pattern.links
        ), f"group {i} has no bottleneck"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=8))
def test_transfers_sharing_one_link_follow_processor_sharing(sizes_mb: list[float]) -> None:
    # N transfers start together on one link: the k-th smallest ends at (s_1 + ... + s_k + (N - k) s_k) / C.
    t = Timeline([1 * GB_PER_S])
    for i, size in enumerate(sizes_mb):
        t.start(str(i), on(0), size * MB)
    done = t.run()
    ordered = sorted(sizes_mb)
    n = len(ordered)
    for i, size in enumerate(sizes_mb):
        k = ordered.index(size)
        expected = (sum(ordered[: k + 1]) + (n - k - 1) * ordered[k]) * MB / GB_PER_S
        assert done[str(i)] == pytest.approx(expected, rel=1e-9)
    assert max(done.values()) == pytest.approx(sum(sizes_mb) * MB / GB_PER_S, rel=1e-9)
