"""`trawler robots URL`: fetch robots.txt and say why a URL is allowed or not.

The answer a user wants when asking "why was this skipped?": the verdict,
the rule and line that decided it, the group that applied, and how the
robots.txt fetch itself went (RFC 9309 §2.3.1 gives every outcome a meaning).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from trawler.config import CrawlConfig
from trawler.fetch import Fetcher
from trawler.robotscache import RobotsEntry, entry_from_fetch
from trawler.urls import normalise, origin


@dataclass(slots=True)
class RobotsReport:
    url: str
    robots_url: str
    robots_token: str  # the product token the groups were matched on (RFC 9309 §2.2.1)
    token_source: str  # "--robots-agent" or "from the User-Agent"
    fetch_status: int | None
    fetch_error: str | None
    meaning: str  # how RFC 9309 reads the fetch outcome
    allowed: bool
    rule: str | None
    line: int | None
    group: str | None
    crawl_delay: float | None
    sitemaps: list[str]

    def as_dict(self) -> dict:
        return asdict(self)


async def check_robots(url: str, config: CrawlConfig) -> RobotsReport:
    """Fetch the robots.txt that governs ``url`` and explain its verdict."""
    normalised = normalise(url)
    if normalised is None:
        raise ValueError(f"not an http(s) URL: {url!r}")
    robots_url = origin(normalised) + "/robots.txt"
    fetcher = Fetcher(config)
    await fetcher.start()
    try:
        result = await fetcher.fetch_robots(robots_url)
    finally:
        await fetcher.close()
    entry = entry_from_fetch(result, config.robots_token, time.monotonic(), None)
    verdict = entry.rules.explain(normalised)
    return RobotsReport(
        url=normalised, robots_url=robots_url, robots_token=config.robots_token,
        token_source="--robots-agent" if config.robots_agent else "from the User-Agent",
        fetch_status=result.status,
        fetch_error=result.error, meaning=_meaning(entry, result.status),
        allowed=verdict.allowed and entry.fatal_error is None, rule=verdict.rule,
        line=verdict.line, group=verdict.group, crawl_delay=entry.rules.crawl_delay,
        sitemaps=entry.rules.sitemaps,
    )  # fmt: skip


def _meaning(entry: RobotsEntry, status: int | None) -> str:
    if entry.fatal_error is not None:
        return f"host cannot be fetched ({entry.fatal_error})"
    if entry.unavailable:
        return "unreachable (5xx, 429 or network error): everything disallowed for now"
    if status is not None and 200 <= status < 300:
        return "parsed"
    return "unavailable (4xx or too many redirects): no restrictions"


def format_report(report: RobotsReport) -> str:
    verdict = "ALLOWED" if report.allowed else "DISALLOWED"
    status = report.fetch_status if report.fetch_error is None else report.fetch_error
    if report.rule is None:
        decided = "no rule matched"
    elif report.line is None:  # disallow-all implied by the fetch outcome, not a line
        decided = f"{report.rule} (implied: robots.txt {report.meaning})"
    else:
        decided = f"{report.rule} (line {report.line})"
    lines = [
        f"{verdict}: {report.url}",
        f"robots.txt: {report.robots_url} ({status}; {report.meaning})",
        f"robots token: {report.robots_token or '(none)'} ({report.token_source})",
        f"group: {report.group or '(no group applies)'}",
        f"decided by: {decided}",
    ]
    if report.crawl_delay is not None:
        lines.append(f"crawl-delay: {report.crawl_delay:g} s")
    lines += [f"sitemap: {s}" for s in report.sitemaps]
    return "\n".join(lines)
