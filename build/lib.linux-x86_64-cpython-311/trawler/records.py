"""Records that cross stage boundaries.

Every stage between the fetcher and the backends is a pure function over
these small slotted dataclasses (DESIGN.md, "The flow of one URL").
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class CrawlRequest:
    """One URL handed out by the frontier (leased until acknowledged)."""

    url: str  # normalised absolute URL
    depth: int  # seeds are depth 0
    parent_url: str | None = None
    host: str = ""  # politeness key: host[:port] (urls.host_key)
    fp: int = 0  # 64-bit fingerprint of url (dedup.url_fingerprint): the seen-set key
    attempts: int = 0  # fetch attempts made before this one
    kind: str = "page"  # "page", or "sitemap" (parsed as a sitemap, not as HTML)
    lastmod: str | None = None  # <lastmod> of the sitemap entry that listed this URL
    revisit: object | None = None  # kind "revisit": the page's RevisitState (recrawl_lanes.py)
    changefreq: str | None = None  # <changefreq> of the sitemap entry that listed this URL
    importance: float = 0.0  # --priority importance: the OPIC cash it carries while leased


@dataclass(slots=True)
class Hop:
    """One redirect hop: the URL asked for and the status it answered with."""

    url: str
    status: int
    location: str | None = None


@dataclass(slots=True)
class FetchResult:
    """What the fetcher got for one request, success or failure.

    ``body`` is the payload with Content-Encoding removed (what the parser
    reads); ``raw_body`` is the payload as sent on the wire (what the WARC
    response record keeps, next to the original headers).
    """

    url: str  # the URL asked for (first hop)
    final_url: str  # the URL that answered after redirects
    status: int | None = None  # HTTP status of the final hop; None when no response
    headers: list[tuple[str, str]] = field(default_factory=list)  # final hop, raw order
    content_type: str | None = None  # media type, lowercased, without parameters
    charset: str | None = None  # charset parameter of Content-Type, if any
    body: bytes = b""
    raw_body: bytes = b""
    http_version: str = "1.1"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    redirects: list[Hop] = field(default_factory=list)
    ip_address: str | None = None
    error: str | None = None  # short code: dns, connect, timeout, too_large, ...
    error_detail: str | None = None
    started_at: float = 0.0  # wall clock (time.time()) when the request started
    duration_s: float = 0.0
    retry_after_s: float | None = None  # from a 429/503 Retry-After header
    # --render (render/shell.py): what was decided for the page (None: not considered);
    # ``dom`` the rendered document (UTF-8), parsed instead of ``body`` when set;
    # ``subresources`` the requests the rendered page made, as fetched (archived).
    rendered: str | None = None
    dom: bytes | None = None
    subresources: list[FetchResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


@dataclass(slots=True)
class Link:
    """A link found on a page, resolved against the page's base URL."""

    url: str  # absolute, not yet normalised
    nofollow: bool = False
    anchor: str | None = None  # its text, whitespace collapsed (<area>: alt); None when empty
    rel: str | None = None  # its rel attribute, lowercased, whitespace collapsed


# One edge of the link graph (graph.py): (to_url, to_fp, anchor, rel, reason). A tuple,
# not a dataclass: edges cross from the parser processes by the thousand, and tuples
# pickle cheapest.
Edge = tuple[str, int | None, str | None, str | None, str | None]


@dataclass(slots=True)
class ParsedPage:
    """What the parser extracted from one HTML document."""

    title: str | None = None
    description: str | None = None
    keywords: str | None = None
    text: str = ""
    main_text: str = ""  # text without nav/header/footer/aside: what near-dup detection compares
    links: list[Link] = field(default_factory=list)
    canonical: str | None = None  # absolute URL from <link rel=canonical>
    base_href: str | None = None
    meta_robots: frozenset[str] = frozenset()  # e.g. {"noindex", "nofollow"}
    charset: str | None = None  # the charset the body was decoded with
    error: str | None = None  # why the document was not parsed ("parse_too_complex")
    # <meta name="tdm-reservation"> / <meta name="tdm-policy"> contents (tdmrep.py)
    tdm_reservation: str | None = None
    tdm_policy: str | None = None


@dataclass(slots=True)
class PageRecord:
    """One row of page metadata, as the store keeps it and export writes it."""

    url: str
    final_url: str
    status: int | None
    content_type: str | None
    content_length: int
    depth: int
    parent_url: str | None
    title: str | None
    description: str | None
    keywords: str | None
    text: str | None
    links_count: int
    content_sha256: str | None
    fetched_at: float
    fetch_duration_s: float
    error: str | None
    warc_file: str | None = None
    warc_offset: int | None = None
    canonical: str | None = None
    noindex: bool = False
    attempts: int = 1
    host: str | None = None
    duplicate_of: str | None = None  # canonical URL elsewhere, or first page with this content
    simhash: str | None = None  # 16 hex digits
    text_hash: str | None = None  # exact-duplicate key of the extracted text
    sitemap_lastmod: str | None = None  # <lastmod> from a sitemap, as given
    sitemap_changefreq: str | None = None  # <changefreq> from a sitemap (sitemaps.CHANGEFREQS)
    minhash: bytes | None = None  # MinHash sketch of the main text (minhash.py)
    kind: str = "page"  # "page" or "sitemap" (CrawlRequest.kind); robots.txt: RobotsRecord
    rendered: str | None = None  # FetchResult.rendered: the --render decision (render/shell.py)
    # Reuse reservations (tdmrep.py): the page's TDMRep statement and where it was read
    # (meta, header, tdmrep.json); None: none stated. The host's robots.txt groups for
    # AI crawlers, comma-separated: those named, those disallowed from "/"; None: no file.
    tdm_reservation: bool | None = None
    tdm_policy: str | None = None
    tdm_source: str | None = None
    ai_robots_groups: str | None = None
    ai_robots_disallowed: str | None = None


@dataclass(slots=True)
class RobotsRecord:
    """One robots.txt download as the store keeps it: a row per fetch (retries and
    the 24-hour refetch included), exported with kind "robots". ``status`` is the
    answer (robotscache.py says what it means); ``error`` a fetch error only."""

    url: str  # scheme://host:port/robots.txt
    final_url: str  # after the redirects the robots.txt fetch follows
    status: int | None
    content_type: str | None
    content_length: int
    content_sha256: str | None
    fetched_at: float  # wall clock, when the request started
    fetch_duration_s: float
    error: str | None
    host: str
    warc_file: str | None = None
    warc_offset: int | None = None


@dataclass(slots=True)
class RobotsFetch:
    """A robots.txt fetch as a cache keeps it beyond one process: for the other
    workers of a job, and for the next run after a restart (robotscache.py says
    what it means)."""

    status: int | None  # None on a network error
    error: str | None
    body: bytes
    fetched_at: float  # wall clock (time.time()): monotonic times end with the process
    failures: int = 0  # consecutive unavailable answers, this one included


@dataclass(slots=True)
class Progress:
    """A running crawl's numbers, reported every second."""

    pages: int
    pages_per_s: float
    queued: int
    active_hosts: int
    errors: int
    elapsed_s: float
    not_html: int = 0  # successful downloads that are not HTML: not errors
