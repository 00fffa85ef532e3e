"""The bytes of one WARC 1.1 record: named fields, digests, dates and record ids.

These run on the embedded backend's writer thread for every page, and every
moment that thread holds the GIL is one the crawler's event loop waits
(issue 14: WARC writing was 13 % of all GIL samples). So the Python work per
record is kept small: a record's fields are one f-string, header lines are
joined by C code (``map(": ".join, …)``), SHA-1 digests go to base32 with a
few big-integer operations instead of ``base64.b32encode`` (pure Python in
3.11, ~4 µs a digest), dates are formatted once per second and record ids
come from one ``os.urandom`` call per 256 of them. tests/unit/warc_reference.py
is the plain version each record is compared with, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from http import HTTPStatus
from operator import itemgetter
from types import MappingProxyType
from urllib.parse import urlsplit

WARC_VERSION = "WARC/1.1"
_END = b"\r\n\r\n"
# RFC 9110 §15: the standard reason phrases (the fetcher keeps none of its own).
_REASONS = MappingProxyType({status.value: status.phrase for status in HTTPStatus})
_NAME = itemgetter(0)
# scheme://authority path ?query, printable ASCII only, no fragment, no IPv6 brackets.
_PLAIN_URL = re.compile(
    r"https?://([^/?#\[\]\x00-\x20\x7f-\U0010ffff]*)"
    r"(/[^?#\x00-\x20\x7f-\U0010ffff]*)?"
    r"(?:\?([^#\x00-\x20\x7f-\U0010ffff]*))?"
)
_BASE32 = bytes.maketrans(bytes(range(32)), b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")  # RFC 4648 §6


def _spread_steps() -> tuple[tuple[int, int], ...]:
    """(mask, shift) steps that move each of the 32 five-bit groups of a 160-bit
    number into a byte of its own (its low 5 bits), keeping their order: each
    step halves the groups of fields and shifts the upper half of each up."""
    steps, blocks, fields = [], 1, 32
    while fields > 1:
        half = fields // 2
        stride = fields * 8  # bits per block once every field has a byte
        low = sum(((1 << half * 5) - 1) << block * stride for block in range(blocks))
        steps.append((low, half * 8 - half * 5))
        blocks, fields = blocks * 2, half
    return tuple(steps)


_SPREAD = _spread_steps()


def _base32(digest: bytes) -> str:
    """``sha1:`` and the base32 of a 20-byte digest: its 32 groups of 5 bits spread
    to a byte each, then one translate() to letters."""
    bits = int.from_bytes(digest, "big")
    for mask, shift in _SPREAD:
        bits = (bits & mask) | ((bits & ~mask) << shift)
    return "sha1:" + bits.to_bytes(32, "big").translate(_BASE32).decode("ascii")


def sha1_base32(data: bytes) -> str:
    """``sha1:`` and the base32 of the SHA-1 of ``data`` (WARC 1.1 §5.8), as
    ``base64.b32encode`` spells it: 20 bytes are 32 letters, no padding."""
    return _base32(hashlib.sha1(data).digest())


_EMPTY_SHA1 = sha1_base32(b"")


class WarcDates:
    """WARC-Date values (WARC 1.1 §5.4: W3C-ISO8601, UTC, fractional seconds
    allowed), the very text of ``datetime.fromtimestamp(t, UTC)`` formatted
    ``%Y-%m-%dT%H:%M:%S.%fZ``; the part up to the seconds is formatted once a second."""

    __slots__ = ("_second", "_prefix")

    def __init__(self) -> None:
        self._second: int | None = None
        self._prefix = ""

    def format(self, timestamp: float) -> str:
        second = int(timestamp)
        # As datetime does: the fraction (exact: a float minus its integer part)
        # in microseconds, rounded half to even, carried into the seconds.
        micros = round((timestamp - second) * 1e6)
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        elif micros < 0:
            second, micros = second - 1, micros + 1_000_000
        if second != self._second:
            self._second = second
            # datetime, not time.gmtime: a date past year 9999 must raise ValueError
            # as it always has (that page is kept as a store_error, base.py).
            self._prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        return f"{self._prefix}{micros:06d}Z"


class RecordIds:
    """WARC-Record-IDs (WARC 1.1 §5.2): random UUIDs as ``<urn:uuid:…>``, each the
    same as ``uuid.uuid4()`` would give (RFC 4122 §4.4: version 4, variant bits
    10), drawn ``batch`` at a time from one ``os.urandom`` call."""

    __slots__ = ("_batch", "_hex", "_next")
    # byte 6: version 4 in the high nibble; byte 8: the variant's two high bits 10.
    _VERSION = bytes((b & 0x0F) | 0x40 for b in range(256))
    _VARIANT = bytes((b & 0x3F) | 0x80 for b in range(256))

    def __init__(self, batch: int = 256) -> None:
        self._batch = batch
        self._hex = ""
        self._next = 0

    def take(self) -> str:
        if self._next >= len(self._hex):
            self._refill()
        start = self._next
        self._next = start + 32
        h = self._hex
        return (
            f"<urn:uuid:{h[start : start + 8]}-{h[start + 8 : start + 12]}-"
            f"{h[start + 12 : start + 16]}-{h[start + 16 : start + 20]}-"
            f"{h[start + 20 : start + 32]}>"
        )

    def _refill(self) -> None:
        raw = bytearray(os.urandom(16 * self._batch))
        raw[6::16] = raw[6::16].translate(self._VERSION)
        raw[8::16] = raw[8::16].translate(self._VARIANT)
        self._hex, self._next = raw.hex(), 0


def warc_record(fields: str, head: bytes, payload: bytes, payload_digest: bool) -> bytes:
    """One record (WARC 1.1 §4): version line, ``fields`` (its ``Name: value\\r\\n``
    lines up to Content-Type), length and digests, the block (``head`` + ``payload``),
    CRLF CRLF. The payload digest is of ``payload`` (§5.9: the entity body after
    transfer decoding)."""
    block = hashlib.sha1(head)
    block.update(payload)
    digests = f"WARC-Block-Digest: {_base32(block.digest())}\r\n"
    if payload_digest:
        payload_sha1 = sha1_base32(payload) if payload else _EMPTY_SHA1
        digests += f"WARC-Payload-Digest: {payload_sha1}\r\n"
    text = f"{WARC_VERSION}\r\n{fields}Content-Length: {len(head) + len(payload)}\r\n{digests}\r\n"
    return b"".join((text.encode(), head, payload, _END))


def request_target(url: str) -> tuple[str, str]:
    """(authority, origin-form target) of the request for ``url`` (RFC 9112 §3.2.1),
    as ``urlsplit`` gives them: path or ``/``, then ``?query`` if not empty. A plain
    http(s) URL in printable ASCII is split by one regex match; any other goes
    through urlsplit (its whitespace removal, IPv6 brackets, Unicode checks)."""
    plain = _PLAIN_URL.fullmatch(url)
    if plain is not None:
        netloc, path, query = plain.groups()
    else:
        parts = urlsplit(url)
        netloc, path, query = parts.netloc, parts.path, parts.query
    return netloc, (path or "/") + (f"?{query}" if query else "")


def status_line(http_version: str, status: int) -> str:
    # RFC 9112 §4: the space before the reason phrase stays even when it is empty.
    return f"HTTP/{http_version} {status} {_REASONS.get(status, '')}"


def http_head(start_line: str, headers: list[tuple[str, str]]) -> bytes:
    """Start line and header lines, CRLF CRLF-ended (RFC 9112 §2.1), in the bytes the
    fetcher decoded them from (surrogateescape); line breaks inside a name or value
    become spaces, so that no header can forge a line of its own."""
    text = "\r\n".join([start_line, *map(": ".join, headers)])
    lines = len(headers)
    if text.count("\n") != lines or text.count("\r") != lines:  # a name or value has one
        text = "\r\n".join([start_line, *(f"{clean(n)}: {clean(v)}" for n, v in headers)])
    return (text + "\r\n\r\n").encode("utf-8", "surrogateescape")


def response_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The response's headers as archived: the body is stored de-chunked, so a reader
    must not de-chunk it again; Content-Encoding stays (raw_body is still encoded)."""
    if "transfer-encoding" not in "\n".join(map(_NAME, headers)).lower():
        return headers
    return [
        ("X-Trawler-Original-Transfer-Encoding", value)
        if name.lower() == "transfer-encoding"
        else (name, value)
        for name, value in headers
    ]


def is_content_encoded(headers: list[tuple[str, str]]) -> bool:
    """True when a Content-Encoding other than identity was applied to the body."""
    if "content-encoding" not in "\n".join(map(_NAME, headers)).lower():
        return False
    return any(
        name.lower() == "content-encoding" and value.strip().lower() not in ("", "identity")
        for name, value in headers
    )


def clean(text: str) -> str:
    """Header names and values must not smuggle line breaks into the record."""
    if "\r" in text or "\n" in text:
        return text.replace("\r", " ").replace("\n", " ")
    return text
