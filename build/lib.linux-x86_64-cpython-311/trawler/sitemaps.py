"""Sitemaps (sitemaps.org protocol 0.9): what URLs a fetched sitemap lists.

Pure: bytes in, a ``SitemapDoc`` out; fetching is the engine's job. Handles
XML ``<urlset>`` and ``<sitemapindex>`` (any namespace or none), plain-text
sitemaps (one URL a line), RSS 2.0 / RSS 1.0 / Atom feeds (which the protocol
also accepts), and gzip-compressed bodies of any of these.

Hostile input costs a recorded error, never memory or time:

- decompression stops at ``max_bytes`` of output (a gzip bomb is cut off);
- the protocol's caps — 50,000 URLs and 50 MB uncompressed — stop parsing;
- a document with a DTD (``<!DOCTYPE``) is refused before expat reads it,
  so no entity is ever declared and billion-laughs expansion cannot start.
  Sitemaps have no use for a DTD.
- parsing is incremental (expat), so a malformed or cut-off document still
  yields the entries before the fault.

``parse_sitemap`` never raises.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal
from xml.parsers import expat

# sitemaps.org: "no more than 50,000 URLs and must be no larger than 50MB
# (52,428,800 bytes)" uncompressed; the same limits bind a sitemap index.
MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_LOC_CHARS = 2048  # sitemaps.org: <loc> "must be less than 2,048 characters"
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_BYTES = 1024 * 1024  # expat is fed this much at a time
_DEFAULT_PORTS = {"http": 80, "https": 443}
# scheme://[userinfo@]host[:port][path][?query][#fragment], no whitespace anywhere.
_ABSOLUTE_HTTP = re.compile(
    r"(?i)(https?)://(?:[^/?#@\s]*@)?(\[[0-9a-f:.]+\]|[^/?#:@\s\[\]]+)(?::(\d*))?"
    r"(/[^?#\s]*)?(?:[?#]\S*)?"
)
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")

Kind = Literal["urlset", "index", "text", "feed", "invalid"]
# sitemaps.org protocol: the values <changefreq> may take (others are ignored).
CHANGEFREQS = frozenset({"always", "hourly", "daily", "weekly", "monthly", "yearly", "never"})


@dataclass(slots=True)
class SitemapEntry:
    """One ``<url>`` of a urlset (or one feed item, or one line of a text sitemap)."""

    loc: str  # absolute http(s) URL, surrounding whitespace removed, entities decoded
    lastmod: str | None = None  # as written in the document
    lastmod_ts: float | None = None  # lastmod as a Unix timestamp, when it parses
    changefreq: str | None = None  # <changefreq>, one of CHANGEFREQS (lowercased), else None


@dataclass(slots=True)
class SitemapDoc:
    """What one sitemap document lists. ``error`` is a short code, None when clean."""

    kind: Kind
    urls: list[SitemapEntry] = field(default_factory=list)  # urlset, text, feed
    sitemaps: list[str] = field(default_factory=list)  # index: the child sitemaps' locs
    error: str | None = None  # bad_gzip, too_large, invalid_xml, doctype, not_a_sitemap, empty
    truncated: bool = False  # a limit stopped parsing: more entries exist than were read
    skipped: int = 0  # locs dropped as not absolute http(s) URLs (or too long)


class _Stop(Exception):
    """Raised inside an expat callback to end parsing early."""


# --- the entry point ----------------------------------------------------------------


def parse_sitemap(
    body: bytes, url: str, max_urls: int = MAX_URLS, max_bytes: int = MAX_BYTES
) -> SitemapDoc:
    """Parse a sitemap fetched from ``url`` (gzip, XML, feed or text), within the caps.

    An entry of an index that points back at ``url`` itself is dropped.
    """
    try:
        data, error = _gunzip(body, max_bytes)
        too_large = len(data) > max_bytes
        data = data[:max_bytes]
        if not data or data.isspace():
            return SitemapDoc("invalid", error=error or "empty")
        if _looks_like_xml(data):
            doc = _parse_xml(data, url, max_urls)
        else:
            doc = _parse_text(data, max_urls)
    except Exception:  # the contract is "never raises"; a bug costs one sitemap
        return SitemapDoc("invalid", error="internal")
    if too_large:
        doc.truncated = True
    cause = "too_large" if too_large else error
    if cause is not None and doc.error in (None, "invalid_xml"):
        doc.error = cause  # the cut or the bad stream, not the document, explains the fault
    return doc


def _gunzip(body: bytes, max_bytes: int) -> tuple[bytes, str | None]:
    """Undo gzip (sniffed by its magic bytes), producing at most ``max_bytes + 1`` bytes."""
    if not body.startswith(_GZIP_MAGIC):
        return body, None
    out = bytearray()
    rest = body
    try:
        while rest.startswith(_GZIP_MAGIC) and len(out) <= max_bytes:  # one member at a time
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # max_length bounds the output whatever the input: a bomb stops here.
            out += inflater.decompress(rest, max_bytes + 1 - len(out))
            rest = inflater.unused_data
    except zlib.error:
        return bytes(out), "bad_gzip"  # what inflated before the fault is still parsed
    return bytes(out), None


def _looks_like_xml(data: bytes) -> bool:
    head = data[:1024]
    if head.startswith(_BOMS[1:]):  # UTF-16: text sitemaps must be UTF-8, so this is XML
        return True
    return head.removeprefix(_BOMS[0]).lstrip().startswith(b"<")


# --- XML: urlset, sitemapindex, RSS, Atom --------------------------------------------

# root element → (kind, entry element, location field, date field), local names.
_ROOTS: dict[str, tuple[Kind, str, str, str]] = {
    "urlset": ("urlset", "url", "loc", "lastmod"),
    "sitemapindex": ("index", "sitemap", "loc", "lastmod"),
    "rss": ("feed", "item", "link", "pubDate"),  # RSS 2.0
    "RDF": ("feed", "item", "link", "date"),  # RSS 1.0 (dc:date)
    "feed": ("feed", "entry", "link", "updated"),  # Atom: <link href>
}


_CHANGEFREQ = "changefreq"  # a urlset entry's field; no feed element has that name


class _XmlCollector:
    """Expat callbacks that turn entries into a SitemapDoc as they close.

    Names are matched by local name (the part after any prefix), and a field
    counts only as a direct child of its entry: ``<image:loc>`` inside
    ``<image:image>`` is not the page's ``<loc>``.
    """

    def __init__(self, url: str, max_urls: int) -> None:
        self.doc = SitemapDoc("invalid")
        self.url = url
        self.max_urls = max_urls
        self.shape: tuple[Kind, str, str, str] | None = None
        self.depth = 0
        self.entry_depth = 0  # depth of the open entry element, 0 when none
        self.field: str | None = None  # local name of the field whose text is collected
        self.text: list[str] = []
        self.loc: str | None = None
        self.lastmod: str | None = None
        self.changefreq: str | None = None

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        local = name.rpartition(":")[2]
        if self.shape is None:
            self._root(local)
            return
        _kind, entry, loc_name, date_name = self.shape
        if not self.entry_depth:
            if local == entry:
                self.entry_depth, self.loc, self.lastmod = self.depth, None, None
                self.changefreq = None
        elif self.depth == self.entry_depth + 1 and local in (loc_name, date_name, _CHANGEFREQ):
            self.field, self.text = local, []
            if local == "link" and "href" in attrs:  # Atom
                # RFC 4287 §4.2.7.2: no rel means "alternate"; §4.1.1 allows one alternate
                # per type and language, so an entry may have several: the first is the page.
                if self.loc is None and attrs.get("rel", "alternate") == "alternate":
                    self.loc = attrs["href"]
                self.field = None

    def _root(self, local: str) -> None:
        self.shape = _ROOTS.get(local)
        if self.shape is None:
            self.doc.error = "not_a_sitemap"
            raise _Stop
        self.doc.kind = self.shape[0]

    def end(self, name: str) -> None:
        if self.field is not None and self.depth == self.entry_depth + 1:
            value = "".join(self.text).strip()
            assert self.shape is not None
            if self.field == self.shape[2]:
                self.loc = value
            elif self.field == _CHANGEFREQ:
                self.changefreq = value.lower() if value.lower() in CHANGEFREQS else None
            else:
                self.lastmod = value or None
            self.field = None
        elif self.depth == self.entry_depth:
            self.entry_depth = 0
            self._emit()
        self.depth -= 1

    def chars(self, data: str) -> None:
        if self.field is not None:
            self.text.append(data)

    def _emit(self) -> None:
        doc, loc = self.doc, (self.loc or "").strip()
        if not valid_loc(loc) or (doc.kind == "index" and loc == self.url):
            doc.skipped += 1
            return
        if len(doc.urls) + len(doc.sitemaps) >= self.max_urls:
            doc.truncated = True
            raise _Stop
        if doc.kind == "index":
            doc.sitemaps.append(loc)
        else:
            doc.urls.append(SitemapEntry(loc, self.lastmod, parse_lastmod(self.lastmod),
                                         self.changefreq))  # fmt: skip


class _Refused(_Stop):
    """The document has a DTD."""


def _refuse_dtd(*_args: object) -> None:
    # Entities can only be declared in a DTD; refusing it first means no
    # internal entity (billion laughs) or external one (XXE) ever exists.
    raise _Refused


def _parse_xml(data: bytes, url: str, max_urls: int) -> SitemapDoc:
    collector = _XmlCollector(url, max_urls)
    parser = expat.ParserCreate()  # no namespace processing: undeclared prefixes are common
    parser.buffer_text = True
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.CharacterDataHandler = collector.chars
    parser.StartDoctypeDeclHandler = _refuse_dtd
    parser.EntityDeclHandler = _refuse_dtd
    try:
        for offset in range(0, len(data), _CHUNK_BYTES):
            parser.Parse(data[offset : offset + _CHUNK_BYTES], False)
        parser.Parse(b"", True)
    except _Refused:
        return SitemapDoc("invalid", error="doctype")
    except _Stop:
        pass
    except expat.ExpatError:
        collector.doc.error = "invalid_xml"  # keep the entries read before the fault
    return collector.doc


# --- plain text ---------------------------------------------------------------------


def _parse_text(data: bytes, max_urls: int) -> SitemapDoc:
    """sitemaps.org "Text file": one URL a line, UTF-8, nothing else."""
    doc = SitemapDoc("text")
    text = data.removeprefix(_BOMS[0]).decode("utf-8", errors="replace")
    for line in text.splitlines():
        loc = line.strip()
        if not loc:
            continue
        if not valid_loc(loc):
            doc.skipped += 1
        elif len(doc.urls) >= max_urls:
            doc.truncated = True
            break
        else:
            doc.urls.append(SitemapEntry(loc))
    if not doc.urls and doc.skipped:
        doc.kind, doc.error = "invalid", "not_a_sitemap"
    return doc


# --- dates ---------------------------------------------------------------------------

# W3C Datetime (www.w3.org/TR/NOTE-datetime), the format sitemaps.org requires
# for <lastmod>: YYYY, YYYY-MM, YYYY-MM-DD, then optionally Thh:mm[:ss[.s]]TZD.
_W3C_DATETIME = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)"
    r"(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d+))?)?\s*(Z|[+-]\d\d:?\d\d)?)?)?)?",
    re.ASCII,
)


def parse_lastmod(value: str | None) -> float | None:
    """A lastmod (W3C Datetime) or RSS pubDate (RFC 5322) as a Unix timestamp.

    A time without a zone is taken as UTC, as is a bare date.
    """
    if not value:
        return None
    value = value.strip()
    match = _W3C_DATETIME.fullmatch(value)
    try:
        if match is None:
            when = parsedate_to_datetime(value)  # RSS pubDate; naive ("-0000") means UTC
            return when.replace(tzinfo=when.tzinfo or UTC).timestamp()
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        when = datetime(
            int(year), int(month or 1), int(day or 1),
            int(hour or 0), int(minute or 0), int(second or 0), micro, UTC,
        )  # fmt: skip
        return when.timestamp() - _offset_s(zone)
    except (TypeError, ValueError, OverflowError):
        return None


def _offset_s(zone: str | None) -> int:
    """Seconds east of UTC of a W3C TZD (``Z``, ``+hh:mm``); none means UTC."""
    if zone is None or zone == "Z":
        return 0
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)


# --- which URLs a sitemap may list, and which sitemaps to fetch ---------------------


def valid_loc(loc: str) -> bool:
    """sitemaps.org: a loc is a full URL with protocol; we take http(s) only."""
    if not loc or len(loc) >= MAX_LOC_CHARS:
        return False
    return _split(loc) is not None


def _split(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) of an absolute http(s) URL, else None.

    A regex rather than urlsplit: it runs for each of up to 50,000 locs.
    """
    match = _ABSOLUTE_HTTP.fullmatch(url)
    if match is None:
        return None
    scheme, host, port, path = match.groups()
    scheme = scheme.lower()
    port_number = int(port) if port else _DEFAULT_PORTS[scheme]
    if port_number > 65535:
        return None
    return scheme, host.lower(), port_number, path or "/"


def allowed_by_location(sitemap_url: str, loc: str, from_robots: bool) -> bool:
    """The protocol's "Sitemap file location" rule.

    sitemaps.org: a sitemap at http://example.com/catalog/sitemap.xml may list
    only URLs starting with http://example.com/catalog/ — same scheme, host
    and port, under the sitemap's directory. A sitemap named in robots.txt
    may list any URL of its host ("Sitemaps & Cross Submits"; search engines
    also accept other hosts that way, but we keep to the same host).
    """
    site, target = _split(sitemap_url), _split(loc)
    if site is None or target is None or site[:3] != target[:3]:
        return False
    if from_robots:
        return True
    directory = site[3][: site[3].rfind("/") + 1]
    return target[3].startswith(directory)


def sitemap_urls_from_robots(sitemaps: list[str], origin: str) -> list[str]:
    """The sitemaps to fetch for ``origin`` (scheme://host[:port]).

    Those robots.txt lists (``Rules.sitemaps``; absolute http(s) URLs only,
    RFC 9309 §2.2.4 leaves them to the sitemaps protocol), else the
    conventional ``/sitemap.xml``. Duplicates dropped, order kept.
    """
    listed = [s.strip() for s in sitemaps if valid_loc(s.strip())]
    if not listed:
        listed = [origin.rstrip("/") + "/sitemap.xml"]
    return list(dict.fromkeys(listed))
