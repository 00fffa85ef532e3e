"""How the distributed frontier writes values into Redis: script arguments in
milliseconds, URL fingerprints as 8 bytes, a ``CrawlRequest`` as its queue
entry (the payload). Pure, no I/O.

A queue entry is short, because a queue holds millions of them: Redis keeps a
list of short strings packed (listpack), a few bytes over their length. Host
and depth are not in it (they name the list it sits in: redis_scripts.py):

    <url>[\\n<parent>[\\n<json [attempts, kind, lastmod[, changefreq]]>]]<fp: 8 bytes>

- ``url``: ``/path?query`` stands for ``http://<host>/path?query``, ``\\x02/path``
  for ``https://<host>/path``; any other URL is written whole.
- ``parent``: ``<n>|<rest>``: the first n characters of the URL, then ``rest``
  (a link's parent is most often a page of the same site).
- the JSON array only when a field is not its default (a retried or sitemap URL);
  ``changefreq`` (a sitemap entry's, issue 15) only when set, so an entry without it
  is the same bytes as before it was carried, and one written before decodes
  without it.
- the fingerprint last, where the scripts read it (``string.sub(p, -8)``).

Entries written by earlier versions are JSON arrays
``["fp", depth, "host", "url", parent, attempts, kind, lastmod]``; they still
decode, so a job queued by an older version is crawled after an upgrade.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TypeVar

from trawler.records import CrawlRequest

T = TypeVar("T")

# URLs per script call at most. Redis runs one script at a time and serves no
# other client meanwhile: a call of 2,000 takes ~40 ms (10,000: ~200 ms).
SCRIPT_CHUNK = 2_000
HTTPS = "\x02"  # control characters never occur in a normalised URL
_DEFAULTS = (0, "page", None)  # attempts, kind, lastmod (changefreq: only when set)


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, rounded up (the scripts' unit)."""
    return math.ceil(seconds * 1000)


def fp8(fp: int) -> bytes:
    """The signed 64-bit fingerprint as 8 big-endian bytes (the seen-set key)."""
    return fp.to_bytes(8, "big", signed=True)


def encode_request(r: CrawlRequest) -> bytes:
    """Deterministic, so re-adding a URL's payload is a no-op."""
    body = _url_code(r.url, r.host)
    extras: tuple = (r.attempts, r.kind, r.lastmod)
    if r.changefreq is not None:
        extras += (r.changefreq,)
    if r.parent_url is not None or extras != _DEFAULTS:
        body += "\n" + ("" if r.parent_url is None else _parent_code(r.parent_url, r.url))
    if extras != _DEFAULTS:
        body += "\n" + json.dumps(extras, separators=(",", ":"), ensure_ascii=False)
    return body.encode() + fp8(r.fp)


def decode_request(payload: bytes, host: str, depth: int) -> CrawlRequest:
    """The entry of a URL queued for ``host`` at ``depth`` (the list it came from)."""
    if payload[:1] == b"[":
        return _decode_json(payload)
    fields = payload[:-8].decode().split("\n", 2)
    url = _url_decode(fields[0], host)
    parent = _parent_decode(fields[1], url) if len(fields) > 1 and fields[1] else None
    attempts, kind, lastmod, *rest = json.loads(fields[2]) if len(fields) > 2 else _DEFAULTS
    fp = int.from_bytes(payload[-8:], "big", signed=True)
    changefreq = rest[0] if rest else None
    return CrawlRequest(url, depth, parent, host, fp, attempts, kind, lastmod,
                        changefreq=changefreq)  # fmt: skip


def lease_key(payload: bytes) -> bytes:
    """The key of a handed-out URL in the job's lease HASH, as NEXT wrote it."""
    if payload[:1] == b"[":  # an older entry: its decimal fingerprint
        return json.loads(payload)[0].encode()
    return payload[-8:]


def chunks(items: Sequence[T]) -> list[Sequence[T]]:
    """Batches of at most ``SCRIPT_CHUNK``: one script call each (bounded work)."""
    return [items[i : i + SCRIPT_CHUNK] for i in range(0, len(items), SCRIPT_CHUNK)]


def commit_new_args(new: Sequence[CrawlRequest]) -> list[str | bytes | int]:
    """COMMIT's arguments that schedule ``new`` (redis_scripts.py)."""
    args: list[str | bytes | int] = [len(new), 0]
    for r in new:
        args += [fp8(r.fp), r.host, r.depth, encode_request(r)]
    return args


def commit_done_args(
    done: Sequence[CrawlRequest], inflight: Mapping[int, bytes]
) -> list[str | bytes | int]:
    """COMMIT's arguments that acknowledge ``done``, by the entries NEXT handed out."""
    args: list[str | bytes | int] = [0, len(done)]
    for r in done:
        payload = inflight.get(r.fp) or encode_request(r)
        args += [lease_key(payload), r.host, r.depth, payload]
    return args


def _url_code(url: str, host: str) -> str:
    for scheme, mark in (("http://", ""), ("https://", HTTPS)):
        base = scheme + host
        if url.startswith(base) and url[len(base) : len(base) + 1] in ("/", "?"):
            return mark + url[len(base) :]
    return url


def _url_decode(code: str, host: str) -> str:
    if code[:1] in ("/", "?"):
        return f"http://{host}{code}"
    if code[:1] == HTTPS:
        return f"https://{host}{code[1:]}"
    return code


def _parent_code(parent: str, url: str) -> str:
    shared = len(os.path.commonprefix([parent, url]))
    return f"{shared}|{parent[shared:]}"


def _parent_decode(code: str, url: str) -> str:
    shared, rest = code.split("|", 1)
    return url[: int(shared)] + rest


def _decode_json(payload: bytes) -> CrawlRequest:
    fp, depth, host, url, *others = json.loads(payload)
    known = dict(zip(("parent_url", "attempts", "kind", "lastmod"), others, strict=False))
    return CrawlRequest(url=url, depth=depth, host=host, fp=int(fp), **known)
