"""What a response's bytes and header values mean, without I/O: Content-Encoding
undone under a size cap, Content-Type and Retry-After parsed.

fetch.py reads the response and calls these; ``FetchError`` is how they, and
the fetcher, report a failure that ends as an error code on the FetchResult.
"""

from __future__ import annotations

import time
import zlib
from email.utils import parsedate_to_datetime

import brotli


class FetchError(Exception):
    """A fetch failed for a reason of ours; ``code`` goes to FetchResult.error."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def decode_body(
    raw: bytes, content_encoding: str | None, max_bytes: int, truncate: bool = False
) -> bytes:
    """Undo Content-Encoding (RFC 9110 §8.4), never producing more than ``max_bytes``:
    a longer result is an error, or with ``truncate`` cut to ``max_bytes``."""
    if not content_encoding or not raw:
        return raw
    body = raw
    # Codings are listed in the order applied, so undo them last first.
    for coding in reversed(content_encoding.lower().split(",")):
        body = _decode_one(body, coding.strip(), max_bytes)
        if len(body) > max_bytes:  # brotli may overshoot its limit a little; zlib stops at it
            if not truncate:
                detail = f"{coding.strip()} body decodes to more than {max_bytes} bytes"
                raise FetchError("too_large", detail)
            body = body[:max_bytes]
    return body


def _decode_one(data: bytes, coding: str, max_bytes: int) -> bytes:
    """One coding undone; at most a little over ``max_bytes`` of output."""
    try:
        if coding in ("gzip", "x-gzip"):
            return _inflate(data, 16 + zlib.MAX_WBITS, max_bytes)
        if coding == "deflate":
            return _inflate(data, _deflate_wbits(data), max_bytes)
        if coding == "br":
            return brotli.Decompressor().process(data, output_buffer_limit=max_bytes + 1)
        if coding in ("identity", ""):
            return data
    except (zlib.error, brotli.error) as exc:
        raise FetchError("bad_encoding", f"cannot decode {coding}: {exc}") from None
    raise FetchError("bad_encoding", f"unknown Content-Encoding {coding!r}")


def _deflate_wbits(data: bytes) -> int:
    """HTTP "deflate" is zlib (RFC 1950), but some servers send raw deflate (RFC 1951)."""
    is_zlib = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
    return zlib.MAX_WBITS if is_zlib else -zlib.MAX_WBITS


def _inflate(data: bytes, wbits: int, max_bytes: int) -> bytes:
    # max_length stops a bomb after max_bytes + 1 bytes of output, whatever the input.
    # A truncated stream yields what it has, as browsers do.
    return zlib.decompressobj(wbits).decompress(data, max_bytes + 1)


def parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    """``text/HTML; charset="UTF-8"`` → ``("text/html", "UTF-8")``."""
    if not value:
        return None, None
    media_type, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        name, _, param_value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = param_value.strip().strip("\"'").strip() or None
    return media_type.strip().lower() or None, charset


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """RFC 9110 §10.2.3: delay-seconds or an HTTP-date; seconds from now, never negative."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() also takes "²", which float() refuses
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000" in RFC 5322 terms; HTTP-dates are always GMT
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
