"""The pictures the HTTP routes answer with (service/http/routes/plots.py draws them in worker processes): their
media types, and a small in-memory cache (the same result, kind and format give the same bytes, so a picture is
drawn once)."""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["MEDIA_TYPES", "PictureCache"]

MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}


class PictureCache:
    """The most recently used pictures, at most `max_entries` of them and `max_bytes` in all."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._pictures: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()
        self._max_entries, self._max_bytes = max_entries, max_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> bytes | None:
        with self._lock:
            picture = self._pictures.get(key)
            if picture is not None:
                self._pictures.move_to_end(key)
            return picture

    def put(self, key: tuple[str, str, str], picture: bytes) -> None:
        if len(picture) > self._max_bytes:
            return
        with self._lock:
            old = self._pictures.pop(key, None)
            self._bytes -= len(old) if old is not None else 0
            self._pictures[key] = picture
            self._bytes += len(picture)
            while len(self._pictures) > self._max_entries or self._bytes > self._max_bytes:
                _, dropped = self._pictures.popitem(last=False)
                self._bytes -= len(dropped)
