"""The rows of the pipeline timeline: the recorded spans (or a saved Chrome trace of them) grouped into one row of
boxes per pipeline stage, its first data-parallel replica.

The engine names its tracks `stage S` (the compute stream), `stage S pp` (sends to the next or previous stage)
and `stage S dp` / `stage S gather` (DP and ZeRO collectives); under full fidelity each replica's compute and
collective tracks carry its number (`stage S dpR`, `stage S gatherR`). A row's compute lane has one box per
forward and per backward pass (the recomputation and the pass's exposed tensor-parallel collectives and MoE
all-to-alls inside it), the exposed waits, the optimizer, the idle time on pipeline dependencies (the bubble) and,
where the engine extrapolated the steady state (options.extrapolate), the span it put back without simulating;
its pp and dp lanes the pipeline sends and the DP/ZeRO collectives as they run. Times are seconds.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["COMPUTE", "DP", "EXTRAPOLATED", "INNER_KINDS", "PASS_KINDS", "PP", "Block", "Row", "TimelineSpan",
           "rows_from_chrome_trace", "rows_of", "spans_from", "spans_from_chrome_trace"]

COMPUTE, PP, DP = "compute", "pp", "dp"
PASS_KINDS = ("forward", "backward")
# The engine's span (category and kind) for the steady-state periods it did not simulate but put back
# (simcore/engine/steady_state/periodic.py, options.extrapolate): one on each stage's track, named 'N steady-state
# periods extrapolated (P ms each)'.
EXTRAPOLATED = "extrapolated"

_TRACK = re.compile(r"^stage (\d+)(?: (pp|dp|gather)(\d*))?$")
_PASS = re.compile(r"^(?:(tp recompute|recompute|tp|ep dispatch\+combine(?: recompute)?) )?(fwd|bwd)\S* mb(\d+)"
                   r"(?: chunk(\d+))?(?: part \d+)?$")
_ON_COMPUTE = {"bubble": "idle", "pp_comm": "pp_comm", "dp_comm": "dp_comm", "cp_comm": "cp_comm",
               "optimizer": "optimizer", EXTRAPOLATED: EXTRAPOLATED}
INNER_KINDS = ("recompute", "tp_comm", "ep_comm")  # the parts of a pass drawn inside its box
_PERIODS = re.compile(r"^(\d+) steady-state periods? extrapolated")


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """One recorded span: its track (e.g. 'stage 3'), name, category and start and end in seconds."""

    track: str
    name: str
    category: str
    start_s: float
    end_s: float


def spans_from(spans: Iterable[Any]) -> list[TimelineSpan]:
    """Spans from any objects with the recorder's fields (simcore's Outcome.spans)."""
    return [TimelineSpan(s.track, s.name, s.category, float(s.start_s), float(s.end_s)) for s in spans]


def _complete_events(trace: Any, keep: Callable[[str], bool] | None = None
                     ) -> Iterator[tuple[str, str, str, float, float]]:
    """(track, name, category, start_s, end_s) of each complete ('X') event of a Chrome trace, in order, those
    on tracks `keep` accepts when it is given; ValueError (as `spans_from_chrome_trace` says) for one of them
    that is not well formed."""
    events = trace.get("traceEvents") if isinstance(trace, Mapping) else trace
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: expected an object with a traceEvents list")
    names: dict[tuple[Any, Any], str] = {}
    for event in events:
        if isinstance(event, Mapping) and event.get("ph") == "M" and event.get("name") == "thread_name":
            names[(event.get("pid"), event.get("tid"))] = str((event.get("args") or {}).get("name", ""))
    kept: dict[tuple[Any, Any], bool] = {}  # by thread: whether its events are kept
    for i, event in enumerate(events):
        # `type is dict` first: the ABC check of isinstance(Mapping) costs more than the rest of the loop
        if not (type(event) is dict or isinstance(event, Mapping)) or event.get("ph") != "X":
            continue
        thread = (event.get("pid"), event.get("tid"))
        wanted = kept.get(thread)
        if wanted is None:
            track = names.setdefault(thread, f"thread {thread[1]}")
            wanted = kept[thread] = keep is None or keep(track)
        if not wanted:
            continue  # before anything else is read: five in six events of a full-fidelity trace end here
        ts, dur = event.get("ts"), event.get("dur")
        if not isinstance(ts, _NUMBER) or not isinstance(dur, _NUMBER) or dur < 0:
            raise ValueError(f"traceEvents[{i}]: a complete event needs numbers ts and dur >= 0")
        yield names[thread], str(event.get("name", "")), str(event.get("cat", "")), ts * 1e-6, (ts + dur) * 1e-6
    if not kept:
        raise ValueError("the trace has no complete ('X') events to draw")


_NUMBER = (int, float)


def spans_from_chrome_trace(trace: Any) -> list[TimelineSpan]:
    """Spans from a Chrome trace (the object with `traceEvents`, or the bare event list) as clustersim writes
    it: complete ('X') events, microsecond times, thread names as tracks. ValueError says what is wrong."""
    return [TimelineSpan(*event) for event in _complete_events(trace)]


def rows_from_chrome_trace(trace: Any) -> list[Row]:
    """The stages' boxes straight from a Chrome trace: what `rows_of(spans_from_chrome_trace(trace))` gives,
    without a span object per event, and with the events of tracks that are never drawn (the other replicas of
    a full-fidelity trace, five in six of its events on the 1T example) passed over unread."""
    return _rows(_complete_events(trace, _drawn_track))


def _drawn_track(track: str) -> bool:
    """Whether some span of `track` may be drawn: a stage's compute or pp track, or replica 0's (or the only)
    dp and gather tracks (`_lane` says which lane each span takes)."""
    match = _TRACK.match(track)
    return match is not None and (match[2] in (None, PP) or match[3] in ("", "0"))


class Block(NamedTuple):
    """One box of the picture: a lane ('compute', 'pp', 'dp'), a kind (forward, backward, recompute, tp_comm,
    ep_comm, pp_comm, dp_comm, cp_comm, optimizer, idle, extrapolated, other), seconds, the pass's microbatch and
    model chunk, and for an extrapolated box the number of steady-state periods it stands for.

    A named tuple, not a frozen dataclass: a full-fidelity picture has a hundred thousand of them, made ten times
    faster so."""

    lane: str
    kind: str
    start_s: float
    end_s: float
    microbatch: int | None = None
    chunk: int = 0
    inner: bool = False  # drawn inside its pass's box
    periods: int = 0  # an extrapolated box: the periods left out of the simulation and put back

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class Row:
    """One pipeline stage's boxes."""

    stage: int
    blocks: tuple[Block, ...]

    def count(self, kind: str) -> int:
        return sum(1 for b in self.blocks if b.kind == kind and not b.inner)

    @property
    def passes(self) -> int:
        return self.count("forward") + self.count("backward")

    @property
    def idle_s(self) -> float:
        return sum(b.duration_s for b in self.blocks if b.kind == "idle")


def _track_lane(track: str) -> tuple[int, str | None] | None:
    """(stage, lane) of the spans of `track`, lane None where it depends on the span (`_span_lane`), or None for
    a track that is not drawn (another replica, not a stage)."""
    match = _TRACK.match(track)
    if match is None:
        return None
    stage, kind, replica = int(match[1]), match[2], match[3]
    if kind is None:
        return stage, COMPUTE
    if kind == PP:
        return stage, PP
    if replica not in ("", "0"):
        return None
    if kind == "gather" or replica == "":
        return stage, DP
    return stage, None


def _span_lane(name: str, category: str) -> str:
    """The lane of a span on `stage S dp0`: under full fidelity that names both replica 0's compute stream and
    its gradient stream; the compute stream's DP spans are its waits."""
    return DP if category == "dp_comm" and not name.startswith("wait") else COMPUTE


def _pass_of(name: str) -> tuple[str, int, int] | None:
    """(direction 'fwd' or 'bwd', microbatch, chunk) of a span that is part of a pass, from its name."""
    match = _PASS.match(name)
    return None if match is None else (match[2], int(match[3]), int(match[4] or 0))


def rows_of(spans: Iterable[TimelineSpan]) -> list[Row]:
    """The stages' boxes, from the recorded spans, stage 0 first. ValueError when no span is a stage's."""
    return _rows((s.track, s.name, s.category, s.start_s, s.end_s) for s in spans)


_Span = tuple[str, str, str, float, float]  # track, name, category, start_s, end_s
_BY_TIME = operator.itemgetter(3, 4)  # spans by start, then end
_ORDER = operator.itemgetter(2, 6, 3, 0, 1)  # a row's boxes by start, inner last, end, lane, kind


def _rows(spans: Iterable[_Span]) -> list[Row]:
    lanes: dict[int, dict[str, list[_Span]]] = {}
    tracks: dict[str, tuple[int, str | None] | None] = {}  # each track's parse
    for span in spans:
        track = span[0]
        where = tracks[track] if track in tracks else tracks.setdefault(track, _track_lane(track))
        if where is not None:
            stage, lane = where
            lanes.setdefault(stage, {COMPUTE: [], PP: [], DP: []})[lane or _span_lane(span[1], span[2])].append(span)
    if not lanes:
        raise ValueError("no span belongs to a pipeline stage (tracks named 'stage N')")
    names: dict[str, tuple[str, int, int] | None] = {}  # span names repeat across stages: parse each once
    rows = []
    for stage in sorted(lanes):
        blocks: list[Block] = []
        passes: dict[tuple[str, int, int], list[_Span]] = {}
        for span in sorted(lanes[stage][COMPUTE], key=_BY_TIME):
            _, name, category, start_s, end_s = span
            if name not in names:
                names[name] = _pass_of(name)
            key = names[name]
            if key is not None:
                passes.setdefault(key, []).append(span)
            elif category == EXTRAPOLATED:
                count = _PERIODS.match(name)
                blocks.append(Block(COMPUTE, EXTRAPOLATED, start_s, end_s, periods=int(count[1]) if count else 0))
            else:
                blocks.append(Block(COMPUTE, _ON_COMPUTE.get(category, "other"), start_s, end_s))
        for (direction, microbatch, chunk), parts in passes.items():
            kind = "forward" if direction == "fwd" else "backward"
            blocks.append(Block(COMPUTE, kind, min(p[3] for p in parts), max(p[4] for p in parts),
                                microbatch, chunk))
            blocks.extend(Block(COMPUTE, p[2], p[3], p[4], microbatch, chunk, inner=True)
                          for p in parts if p[2] in INNER_KINDS)
        for lane, kind in ((PP, "pp_comm"), (DP, "dp_comm")):
            blocks.extend(Block(lane, kind, s[3], s[4]) for s in lanes[stage][lane])
        blocks.sort(key=_ORDER)
        rows.append(Row(stage, tuple(blocks)))
    return rows


