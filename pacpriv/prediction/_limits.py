"""Limits of a served predictor: body size and rows (413 before parsing), rate (429), timeout.

:class:`ServeLimits` holds the settings; :class:`BodyLimit` is a plain ASGI middleware that
answers 413 from the ``Content-Length`` header alone when it is over the limit, and otherwise
reads the body chunk by chunk, stopping with 413 as soon as the count passes the limit (so a
huge body is never held in memory), then reads the nesting depth and the rows (``[``
brackets at the rows' depth, outside strings) from the raw bytes before any JSON parsing: a
body nested deeper than ``{"rows": [[...], ...]}`` gets 422 (a shape error, not a size one);
:class:`RateLimiter` is a token bucket per analyst key (per replica: each replica has its own
buckets; the budget itself is global through the ledger).
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass

import numpy as np

from pacpriv._json import dumps
from pacpriv._validation import check_int, check_real

__all__ = ["BodyLimit", "RateLimiter", "ServeLimits"]


@dataclass(frozen=True)
class ServeLimits:
    """Per-request limits of ``pacpriv serve``.

    Attributes
    ----------
    max_body_bytes : int, default 1 MiB
        Largest request body; larger: 413 before it is read.
    max_rows : int, default 1000
        Most query rows per request; more: 413 before the body is parsed.
    rate : float, default 50
        Requests per second per analyst key (token bucket), ``> 0``.
    burst : int, default 100
        Bucket size (requests allowed at once), ``>= 1``.
    timeout : float, default 30
        Seconds a request may take; past it, its charge is refunded and 503 returned.
    idempotency_ttl : float, default 86400 (24 h)
        Seconds the answer of a request with an ``Idempotency-Key`` is kept for its retries
        (``> 0``). After it, a retry is refused with 410 and charged nothing: the key's charge
        stays in the ledger, so it is never answered and charged twice.
    idempotency_max_rows : int, default 100000
        Most stored answers per predictor (the oldest are dropped first, with the same
        410 for their retries), ``>= 1``.
    """

    max_body_bytes: int = 1 << 20
    max_rows: int = 1000
    rate: float = 50.0
    burst: int = 100
    timeout: float = 30.0
    idempotency_ttl: float = 86400.0
    idempotency_max_rows: int = 100_000

    def __post_init__(self) -> None:
        check_int(self.max_body_bytes, "max_body_bytes", low=64)
        check_int(self.max_rows, "max_rows", low=1)
        check_real(self.rate, "rate", low=0.0, low_inclusive=False)
        check_int(self.burst, "burst", low=1)
        check_real(self.timeout, "timeout", low=0.0, low_inclusive=False)
        check_real(self.idempotency_ttl, "idempotency_ttl", low=0.0, low_inclusive=False)
        check_int(self.idempotency_max_rows, "idempotency_max_rows", low=1)


class RateLimiter:
    """Token buckets by key (thread-safe): :meth:`take` returns 0, or the seconds to wait."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = float(rate), float(burst)
        self._buckets: dict[str | None, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str | None) -> float:
        """Take one token of ``key``'s bucket; the wait (seconds, > 0) when it is empty."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


async def _reply(send, status: int, detail: str | list, headers: tuple = ()) -> None:
    body = dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


#: The shape of a ``/predict`` body, as the errors write it.
EXPECTED_BODY = '{"rows": [[x_11, ..., x_1k], ...]}'
#: Deepest nesting of ``[``/``{`` in a valid body: the object, its list, a row.
MAX_BODY_DEPTH = 3
#: A JSON string (its brackets are text, not structure).
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def body_shape(body: bytes) -> tuple[int, int]:
    """``(depth, rows)`` of a JSON body, read without parsing it: the deepest nesting of
    brackets and braces outside strings, and the lists opened at the rows' depth
    (:data:`MAX_BODY_DEPTH`). Linear time and memory in the body's size."""
    marks = np.frombuffer(_STRING.sub(b'""', body), dtype=np.uint8)
    opens = (marks == ord("[")) | (marks == ord("{"))
    step = opens.astype(np.int64) - ((marks == ord("]")) | (marks == ord("}")))
    if not step.size:
        return 0, 0
    depth = np.cumsum(step)
    rows = int(np.count_nonzero((marks == ord("[")) & (depth == MAX_BODY_DEPTH)))
    return int(depth.max()), rows


#: Largest magnitude of a float64, as an integer (a JSON integer above it cannot be a value).
_FLOAT_MAX_INT = int(np.finfo(np.float64).max)
#: Longest JSON integer that Python converts (``sys.get_int_max_str_digits()``'s default).
_INT_DIGITS_MAX = 4300


@dataclass(frozen=True)
class _OutOfRange:
    """A JSON number literal beyond the float64 range, described by its kind and length
    (``"an integer of 100000 digits"``), never by its value."""

    what: str


def _parse_int(text: str):
    digits = len(text.lstrip("-"))
    if digits > _INT_DIGITS_MAX or abs(int(text)) > _FLOAT_MAX_INT:
        return _OutOfRange(f"an integer of {digits} digits")
    return int(text)


def _parse_float(text: str):
    value = float(text)
    return (_OutOfRange(f"a number of {len(text)} characters that overflows to infinity")
            if math.isinf(value) else value)


def _first_out_of_range(value, loc: tuple) -> tuple | None:
    if isinstance(value, _OutOfRange):
        return loc, value
    items = (value.items() if isinstance(value, dict) else
             enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        found = _first_out_of_range(item, (*loc, str(key)))
        if found is not None:
            return found
    return None


def number_range_error(body: bytes) -> list | None:
    """A located 422 ``detail`` for the first JSON number of ``body`` beyond the float64
    range (a 100,000-digit integer, ``1e400``), naming its field path and length, never its
    value; ``None`` when there is none or the body is not JSON (the application's parser then
    answers). Python's parser alone stops at 4,300-digit integers without a location."""
    import json

    try:
        parsed = json.loads(body, parse_int=_parse_int, parse_float=_parse_float)
    except (ValueError, RecursionError):
        return None
    found = _first_out_of_range(parsed, ("body",))
    if found is None:
        return None
    loc, out = found
    path = "".join(f"[{k}]" if k.isdigit() else (f".{k}" if i else k)
                   for i, k in enumerate(loc[1:]))
    return [{"loc": list(loc), "type": "value_error",
             "msg": f"{path or 'the body'} holds {out.what}: beyond the float64 range "
                    "(magnitude at most about 1.8e308); the number is not shown and nothing "
                    "was charged"}]


class BodyLimit:
    """ASGI middleware: 413 for a body over ``max_bytes`` or with more than ``max_rows`` rows,
    before the application (and its JSON parser) sees it; only for ``paths``."""

    def __init__(self, app, *, max_bytes: int, max_rows: int, paths: tuple[str, ...]) -> None:
        self.app, self.max_bytes, self.max_rows, self.paths = app, max_bytes, max_rows, paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        too_big = (f"request body over the limit of {self.max_bytes} bytes "
                   "(--max-body-bytes); send fewer rows per request")
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _reply(send, 413, too_big)
                return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _reply(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        depth, rows = body_shape(body)
        if depth > MAX_BODY_DEPTH:
            await _reply(send, 422, "request body nested too deeply: expected "
                                    f"{EXPECTED_BODY}, at most {MAX_BODY_DEPTH} levels of "
                                    "brackets and braces; nothing was charged")
            return
        if rows > self.max_rows:
            await _reply(send, 413, f"more than {self.max_rows} query rows in one request "
                                    "(--max-rows); split the batch")
            return
        out_of_range = number_range_error(body)
        if out_of_range is not None:
            await _reply(send, 422, out_of_range)
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` header value (whole seconds, at least 1)."""
    return str(max(1, math.ceil(seconds)))
