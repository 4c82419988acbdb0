"""Results and their Chrome traces as responses, streamed: a trace is stored gzip-compressed (service.jobs.store)
and read back a chunk at a time, sent as stored (``Content-Encoding: gzip``) to a client that accepts gzip, or
inflated chunk by chunk for one that does not. No trace is ever held whole, compressed or not, in the API
process, and the chunks are read and inflated off the event loop (Starlette iterates a plain iterator in its
thread pool), so a download of gigabytes does not hold up /healthz.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from itertools import chain

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from service.jobs.store import TRACE_CHUNK_BYTES, CachedResult, Store

__all__ = ["accepts_gzip", "result_response", "trace_response"]

_GZIP_MAGIC = b"\x1f\x8b"


def accepts_gzip(request: Request) -> bool:
    """Whether the request's Accept-Encoding allows gzip (``gzip`` or ``*``, not with ``q=0``)."""
    for part in request.headers.get("accept-encoding", "").lower().split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip() in ("gzip", "*") and params.replace(" ", "") not in ("q=0", "q=0.0", "q=0.00", "q=0.000"):
            return True
    return False


def _compressed(store: Store, cached: CachedResult) -> Iterator[bytes]:
    if cached.trace is not None:  # just produced: already in memory
        return (cached.trace[i:i + TRACE_CHUNK_BYTES] for i in range(0, len(cached.trace), TRACE_CHUNK_BYTES))
    return store.trace_chunks(cached.key)


def _inflate(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The inflated bytes of a gzip (or, as older databases hold, zlib) stream, a bounded piece at a time."""
    inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # either header
    for chunk in chunks:
        data = inflater.decompress(chunk, TRACE_CHUNK_BYTES * 16)
        yield data
        while inflater.unconsumed_tail:
            yield inflater.decompress(inflater.unconsumed_tail, TRACE_CHUNK_BYTES * 16)
    yield inflater.flush()


def trace_response(request: Request, store: Store, cached: CachedResult) -> Response:
    """The Chrome trace of a stored result: gzip as stored when the client accepts it, else inflated."""
    chunks = _compressed(store, cached)
    first = next(chunks, b"")
    stream = chain([first], chunks)
    headers = {"Vary": "Accept-Encoding"}
    if first.startswith(_GZIP_MAGIC) and accepts_gzip(request):
        return StreamingResponse(stream, media_type="application/json",
                                 headers={**headers, "Content-Encoding": "gzip"})
    return StreamingResponse(_inflate(stream), media_type="application/json", headers=headers)


def result_response(store: Store, cached: CachedResult, include_trace: bool,
                    headers: dict[str, str] | None = None) -> Response:
    """The result JSON as stored; with the Chrome trace under "trace" when asked for (options.trace), streamed."""
    body = cached.result.encode("utf-8")
    if not (include_trace and cached.has_trace):
        return Response(body, media_type="application/json", headers=headers)
    stream = chain([body[:-1] + b', "trace": '], _inflate(_compressed(store, cached)), [b"}"])
    return StreamingResponse(stream, media_type="application/json", headers=headers)
