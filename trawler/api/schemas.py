"""The API's request and response bodies (pydantic: the edge of the program).

Each response model is what /openapi.json promises; the schemathesis test checks
every answer against it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trawler.jobs.model import JobState

# The `responses` argument of a route: status → its OpenAPI description.
Responses = dict[int | str, dict[str, Any]]
REVISIT_S_MAX = 10 * 365 * 86400.0  # a revisit window's bound: ten years, and finite


class Problem(BaseModel):
    detail: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class Invalid(BaseModel):
    """422: ``error`` names the first bad field in one line; ``detail`` lists them all."""

    error: str
    detail: list[FieldError]


class Job(BaseModel):
    id: str
    state: JobState
    seeding: bool
    pages_crawled: int
    urls_queued: int
    errors: int
    pages_per_s: float
    created_at: float
    started_at: float | None
    finished_at: float | None
    estimated_completion: float | None  # Unix time, when it can be told
    options: dict[str, Any]


class RecrawlRequest(BaseModel):
    """A revisit pass's window: the bounds each page's next-visit estimate is clamped
    to (`trawler recrawl --revisit-min/--revisit-max`), seconds; null: the job's."""

    model_config = ConfigDict(extra="forbid")

    revisit_min_s: float | None = Field(default=None, gt=0, le=REVISIT_S_MAX)
    revisit_max_s: float | None = Field(default=None, gt=0, le=REVISIT_S_MAX)


class JobList(BaseModel):
    jobs: list[Job]
    total: int
    offset: int
    limit: int


class JobRequest(BaseModel):
    """A new job: its seeds and the crawl options of `trawler crawl`, by their CLI names
    with underscores (`--max-pages-per-host` → `max_pages_per_host`)."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[str] = Field(min_length=1, max_length=100_000)
    max_depth: int | None = None
    max_pages: int | None = None
    max_pages_per_host: int | None = None
    scope: Literal["host", "domain", "any"] | None = None
    include: list[str] | None = None
    exclude: list[str] | None = None
    delay: float | None = None
    max_crawl_delay: float | None = None
    user_agent: str | None = None
    robots_agent: str | None = None
    concurrency: int | None = None
    allow_private: bool | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    first_byte_timeout: float | None = None
    max_bytes: int | None = None
    strip_param: list[str] | None = None
    warc_max_bytes: int | None = None
    sitemaps: bool | None = None
    tdmrep: bool | None = None
    sitemap_depth: int | None = None
    parse_processes: int | None = None
    parse_time_limit: float | None = None
    near_duplicate_bits: int | None = None
    max_attempts: int | None = None
    max_links_per_page: int | None = None
    robots_retry_wait: list[float] | None = None
    priority: Literal["depth", "importance"] | None = None
    render: Literal["never", "auto", "always"] | None = None
    render_resources: Literal["same-host", "all", "none"] | None = None
    render_concurrency: int | None = None
    render_timeout: float | None = None


class PageRow(BaseModel):
    """A row of `trawler export` (the same columns)."""

    url: str
    final_url: str | None
    status: int | None
    content_type: str | None
    content_length: int | None
    depth: int | None
    parent_url: str | None
    title: str | None
    description: str | None
    keywords: str | None
    links_count: int | None
    content_sha256: str | None
    fetched_at: float | None
    fetch_duration_s: float | None
    canonical: str | None
    noindex: bool
    duplicate_of: str | None
    simhash: str | None
    sitemap_lastmod: str | None
    sitemap_changefreq: str | None = None
    rendered: str | None = None  # the --render decision (render/shell.py)
    # Reuse reservations (tdmrep.py): the page's, and its host's robots.txt AI groups.
    tdm_reservation: bool | None = None
    tdm_policy: str | None = None
    tdm_source: str | None = None
    ai_robots_groups: str | None = None
    ai_robots_disallowed: str | None = None
    error: str | None
    warc_file: str | None
    warc_offset: int | None
    kind: str


class PageList(BaseModel):
    pages: list[PageRow]
    total: int
    offset: int
    limit: int


class PageVersion(BaseModel):
    """One version of a page, as `trawler versions URL` prints it: version 1 is the
    crawl's, each later one a revisit that found a change (or found the page gone)."""

    url: str
    version: int
    fetched_at: float
    final_url: str | None
    status: int | None
    content_type: str | None
    content_length: int | None
    content_sha256: str | None
    simhash: str | None
    distance: int | None  # SimHash bits from the version before (null for version 1)
    title: str | None
    etag: str | None
    last_modified: str | None
    warc_file: str | None
    warc_offset: int | None
    gone: bool  # the page answered 404 or 410
    text: str | None = None  # with ?text=true


class VersionList(BaseModel):
    url: str  # as normalised
    versions: list[PageVersion]


class ErrorRow(BaseModel):
    url: str
    error: str
    status: int | None
    fetched_at: float | None
    attempts: int | None
    host: str | None


class ErrorList(BaseModel):
    errors: list[ErrorRow]  # newest first
    by_code: dict[str, int]
    total: int


class SearchResult(BaseModel):
    url: str
    title: str | None
    snippet: str  # matched terms between ** and **
    fetched_at: float | None
    host: str | None
    score: float
    job: str


class SearchResults(BaseModel):
    results: list[SearchResult]
    total: int  # pages matching, in all


class Throughput(BaseModel):
    now: float  # pages/s over the last 10 s
    last_1m: float
    last_5m: float


class AdminStats(BaseModel):
    workers: dict[str, int]  # active, total
    queue: dict[str, int]  # pending, visited
    throughput: Throughput
    errors: dict[str, float]  # last_hour, rate
    storage: dict[str, int]  # pages, bytes
    jobs: dict[str, int]  # by state


class Timeseries(BaseModel):
    start: int  # Unix second of the first point
    step_s: int
    pages: list[int]
    errors: list[int]
    status_classes: dict[str, list[int]]  # "2xx": a count a second; "none": no status
    bytes: list[int]  # body bytes of the pages fetched, a second


class FeedError(ErrorRow):
    job: str


class Snapshot(BaseModel):
    """The data of each ``snapshot`` event of /api/v1/events: the same shapes as
    /admin/stats, /admin/stats/timeseries, /jobs and /admin/workers answer."""

    at: float  # Unix time it was read
    stats: AdminStats
    series: Timeseries
    jobs: list[Job]  # newest first, at most 100
    workers: list[Worker]
    # Newest first, at most 100: of the running and paused jobs, or else of the newest.
    errors: list[FeedError]


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    detail: str | None = None


class Worker(BaseModel):
    id: str
    state: str  # live, idle, gone
    current_url: str | None = None
    pages: int = 0
    uptime_s: float = 0.0
    last_heartbeat: float | None = None


class BlockRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str = Field(min_length=1, max_length=300)
    reason: str = Field(default="", max_length=1000)


class BlockedDomain(BaseModel):
    domain: str
    reason: str
    added_at: float


class PolitenessSettings(BaseModel):
    """Each field, while set, overrides the same option of every job; null: jobs keep
    their own."""

    model_config = ConfigDict(extra="forbid")

    delay: float | None = Field(default=None, ge=0, le=86_400)
    max_crawl_delay: float | None = Field(default=None, ge=0, le=86_400)
    concurrency: int | None = Field(default=None, ge=1, le=100_000)
