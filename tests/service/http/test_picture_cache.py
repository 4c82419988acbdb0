"""The drawn pictures' cache: the most recently used kept, within a count and a byte budget."""

from __future__ import annotations

from service.http.pictures import PictureCache


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
