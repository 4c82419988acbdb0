"""The drawn pictures' caches: in memory the most recently used, within a count and a byte budget; in the
database beside their results, as long as the results stay and the same versions would draw them."""

from __future__ import annotations

import time
from pathlib import Path

from service.http.picture_store import PictureStore
from service.http.pictures import PictureCache
from service.jobs.store import Store


def test_the_least_recently_used_picture_goes_first() -> None:
    cache = PictureCache(max_entries=2, max_bytes=100)
    cache.put(("a", "timeline", "svg"), b"1" * 10)
    cache.put(("b", "timeline", "svg"), b"2" * 10)
    assert cache.get(("a", "timeline", "svg")) == b"1" * 10  # a is now the most recent
    cache.put(("c", "timeline", "svg"), b"3" * 10)
    assert cache.get(("b", "timeline", "svg")) is None
    assert cache.get(("a", "timeline", "svg")) is not None and cache.get(("c", "timeline", "svg")) is not None


def test_the_byte_budget_holds() -> None:
    cache = PictureCache(max_entries=10, max_bytes=100)
    cache.put(("a", "memory", "png"), b"x" * 60)
    cache.put(("b", "memory", "png"), b"y" * 60)  # 120 bytes: a goes
    assert cache.get(("a", "memory", "png")) is None and cache.get(("b", "memory", "png")) == b"y" * 60
    cache.put(("c", "memory", "png"), b"z" * 101)  # larger than the whole budget: not kept
    assert cache.get(("c", "memory", "png")) is None and cache.get(("b", "memory", "png")) is not None
    cache.put(("b", "memory", "png"), b"w" * 50)  # replacing an entry counts its new size only
    cache.put(("d", "memory", "png"), b"v" * 50)
    assert cache.get(("b", "memory", "png")) == b"w" * 50 and cache.get(("d", "memory", "png")) == b"v" * 50


def test_the_store_keeps_pictures_of_stored_results_drawn_by_these_versions(tmp_path: Path) -> None:
    database = str(tmp_path / "store.db")
    jobs = Store(database)
    jobs.put_result("kept", "{}", None)
    jobs.put_result("pruned", "{}", None)
    kept = PictureStore(database)
    kept.put("kept", "timeline", "png", b"png bytes")
    kept.put("pruned", "memory", "svg", b"<svg/>")
    assert kept.get("kept", "timeline", "png") == b"png bytes" and kept.get("kept", "timeline", "svg") is None
    kept.put("kept", "timeline", "png", b"drawn again")  # replaced
    assert kept.get("kept", "timeline", "png") == b"drawn again"
    assert kept.get("none", "timeline", "png") is None
    kept.put("never-stored", "memory", "png", b"x")  # a picture of no stored result is let go at once
    assert kept.get("never-stored", "memory", "png") is None
    jobs.prune(time.time() + 1)  # the results no job refers to go, and their pictures with the next put
    kept.put("new", "memory", "png", b"y")
    assert kept.get("pruned", "memory", "svg") is None and kept.get("kept", "timeline", "png") is None
    other = PictureStore(database, drawn_by="clustersim 0.0, matplotlib 0.0")
    jobs.put_result("new", "{}", None)
    kept.put("new", "memory", "png", b"y")
    assert other.get("new", "memory", "png") is None and kept.get("new", "memory", "png") == b"y"
    for store in (kept, other, jobs):
        store.close()
