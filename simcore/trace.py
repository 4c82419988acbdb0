"""Chrome trace (the JSON that Perfetto and chrome://tracing load) from recorded spans; no I/O here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simcore.engine.recorder import Span


def chrome_trace(spans: Iterable[Span]) -> dict[str, Any]:
    """One thread per track (a simulated rank's compute, pp-send or dp stream); times in microseconds, to the
    nanosecond."""
    spans = list(spans)
    tracks = sorted({s.track for s in spans}, key=_track_key)
    tid = {track: i for i, track in enumerate(tracks)}
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "clustersim"}}]
    for track in tracks:
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": tid[track], "args": {"name": track}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": tid[track],
                       "args": {"sort_index": tid[track]}})
    for s in sorted(spans, key=lambda s: (tid[s.track], s.start_s, s.end_s)):
        # Both ends are rounded to the nanosecond and the duration is their difference, so a span ends where the
        # next one on its track starts (rounding the duration on its own could make them overlap by 1 ns).
        start_us, end_us = round(s.start_s * 1e6, 3), round(s.end_s * 1e6, 3)
        events.append({"ph": "X", "pid": 0, "tid": tid[s.track], "name": s.name, "cat": s.category,
                       "ts": start_us, "dur": round(end_us - start_us, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _track_key(track: str) -> tuple[int, str]:
    parts = track.split()
    number = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
    return number, track
