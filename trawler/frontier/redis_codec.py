"""How the distributed frontier writes values into Redis: script arguments in
milliseconds, URL fingerprints as 8 bytes, a ``CrawlRequest`` as its queue
member (the payload). Pure, no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields

from trawler.records import CrawlRequest

# The queue member of a URL: ["fp", depth, "host", the other fields in order].
# The scripts read the first three; fields added later decode with defaults.
_OTHER_FIELDS = tuple(f.name for f in fields(CrawlRequest) if f.name not in ("fp", "depth", "host"))


def ms(seconds: float) -> int:
    """Seconds as whole milliseconds, rounded up (the scripts' unit)."""
    return math.ceil(seconds * 1000)


def fp8(fp: int) -> bytes:
    """The signed 64-bit fingerprint as 8 big-endian bytes (the seen-set key)."""
    return fp.to_bytes(8, "big", signed=True)


def encode_request(r: CrawlRequest) -> str:
    """Deterministic, so re-adding a URL's payload is a no-op."""
    values = [str(r.fp), r.depth, r.host, *(getattr(r, name) for name in _OTHER_FIELDS)]
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def decode_request(payload: str) -> CrawlRequest:
    fp, depth, host, *others = json.loads(payload)
    known = dict(zip(_OTHER_FIELDS, others, strict=False))
    return CrawlRequest(fp=int(fp), depth=depth, host=host, **known)
