"""Scripts and stylesheets a job's rendered pages share, fetched once per job.

An application's pages load the same bundle: without a cache every rendered page
fetched it again through the crawler (a request to the host, its interval
waited), as a browser with its cache off would. A browser keeps them; so does
this, within a byte budget, least recently used first out. Only 200 answers to
GET, and never one its server marked ``Cache-Control: no-store`` (RFC 9111
§5.2.2.5). Data (``fetch``/XHR) is always fetched again: it is what changes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from trawler.records import FetchResult

CACHED_TYPES = frozenset({"script", "stylesheet"})  # Playwright resource types
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class SubresourceCache:
    max_bytes: int = DEFAULT_MAX_BYTES
    _entries: OrderedDict[str, FetchResult] = field(default_factory=OrderedDict)
    _bytes: int = 0
    hits: int = 0

    def get(self, url: str, resource_type: str) -> FetchResult | None:
        if resource_type not in CACHED_TYPES:
            return None
        found = self._entries.get(url)
        if found is not None:
            self._entries.move_to_end(url)
            self.hits += 1
        return found

    def put(self, url: str, resource_type: str, result: FetchResult) -> None:
        size = _size(result)
        if resource_type not in CACHED_TYPES or not cacheable(result) or size > self.max_bytes:
            return
        old = self._entries.pop(url, None)
        self._bytes += size - (_size(old) if old is not None else 0)
        self._entries[url] = result
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= _size(evicted)


def cacheable(result: FetchResult) -> bool:
    if result.status != 200 or result.error is not None:
        return False
    control = ",".join(v for k, v in result.headers if k.lower() == "cache-control").lower()
    return "no-store" not in control


def _size(result: FetchResult) -> int:
    return len(result.body) + len(result.raw_body)
