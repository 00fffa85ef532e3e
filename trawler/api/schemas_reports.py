"""The API's URL and host reports (`GET /api/v1/urls?url=…`, `/api/v1/hosts`,
`/api/v1/hosts/{host}`): what it knows of one URL (its fetches, robots.txt verdict,
provenance, reuse reservation) and of one host (its numbers, politeness, robots.txt
files). The rest of the API's bodies are in schemas.py.
"""

from __future__ import annotations

from pydantic import BaseModel


class Fetch(BaseModel):
    attempt: int
    started_at: float | None
    duration_s: float | None
    status: int | None
    error: str | None
    decision: str | None


class RobotsVerdict(BaseModel):
    robots_url: str
    status: int | None
    error: str | None
    fetched_at: float
    allowed: bool
    rule: str | None
    line: int | None
    group: str | None
    crawl_delay: float | None


class Provenance(BaseModel):
    """Why the job fetched the URL or left it out (trawler/provenance.py)."""

    url: str
    decision: str  # fetched, failed, queued, skipped
    found_via: str | None  # seed, link, sitemap, redirect, canonical, robots.txt
    parent_url: str | None  # the page (sitemap, redirecting page) that led to it
    anchor: str | None  # the link's text
    reason: str | None  # why it was left out: the rejected.* / skipped.* counter names
    detail: str | None  # the rule that decided: scope, robots.txt line, trap, budget
    depth: int | None
    status: int | None
    error: str | None


class UrlReport(BaseModel):
    url: str  # the normalised form
    job: str
    host: str
    state: str  # queued, done, skipped, dead; unseen: never queued (a link turned away)
    depth: int | None
    skip_reason: str | None
    kind: str | None
    parent_url: str | None
    status: int | None
    content_sha256: str | None
    error: str | None
    fetched_at: float | None
    fetches: list[Fetch]
    outbound_links: int | None  # links on the page
    # Pages linking to it, from the link graph (a store from before the graph: 1 when
    # a page discovered it); ``linked_from``: the first of them, in crawl order. None:
    # not counted in time while a crawl writes the graph (store/sqlite_graph.py).
    inbound_links: int | None
    linked_from: list[str] = []
    urls_discovered: int  # new URLs it brought into the crawl
    robots: RobotsVerdict | None  # None: no robots.txt of its origin kept
    provenance: Provenance | None = None  # None: the job never met the URL
    # The stored page's reuse reservation (tdmrep.py); all None: no page stored.
    tdm_reservation: bool | None = None
    tdm_policy: str | None = None
    tdm_source: str | None = None  # header, meta, tdmrep.json
    ai_robots_groups: str | None = None
    ai_robots_disallowed: str | None = None


class HostNumbers(BaseModel):
    host: str
    job: str
    queued: int
    fetched: int
    errors: int
    error_rate: float
    mean_response_s: float | None


class RobotsSummary(BaseModel):
    """The host's newest robots.txt: its status, error code, Crawl-delay (on Redis +
    PostgreSQL: the Crawl-delay the workers apply, capped by --max-crawl-delay)."""

    status: int | None
    error: str | None
    crawl_delay: float | None


class HostRow(HostNumbers):
    interval_s: float  # start to start, now: max(delay, Crawl-delay) + back-off
    backoff_s: float | None  # None: not backed off
    robots: RobotsSummary | None  # None: no robots.txt fetched yet
    # Reuse reservations of the host (export_hosts.py): its robots.txt's AI crawler
    # groups, its tdmrep.json (found, absent, malformed, not_fetched; unknown on
    # PostgreSQL) and what that file says of "/".
    ai_robots_groups: str | None = None
    ai_robots_disallowed: str | None = None
    tdmrep_json: str | None = None
    tdmrep_rules: int | None = None
    tdm_reservation: bool | None = None
    tdm_policy: str | None = None


class HostList(BaseModel):
    hosts: list[HostRow]
    total: int
    offset: int
    limit: int


class Politeness(BaseModel):
    last_sent_at: float | None
    next_allowed_at: float | None
    crawl_delay_s: float | None
    backoff_s: float | None
    failures: int | None
    paused_until: float | None


class HostRobots(BaseModel):
    robots_url: str
    status: int | None
    error: str | None
    crawl_delay: float | None
    fetched_at: float
    # The file as fetched (UTF-8, bad bytes replaced; at most its first 512 KiB, all a
    # robots.txt fetch keeps). Null where the store keeps no body
    # (Redis + PostgreSQL: robots.txt bodies are in the workers' WARC files only).
    text: str | None = None


class HostReport(HostNumbers):
    interval_s: float
    politeness: Politeness
    robots: list[HostRobots]
