"""Sitemaps in the crawl: which sitemaps an origin has, and what a fetched one adds.

Sitemap files are crawled like pages (same politeness, robots.txt, retries
and commit) but as ``kind="sitemap"`` requests, which are parsed with
sitemaps.py instead of the HTML parser. Their URLs obey scope, traps, robots
and dedup like any link, and enter the frontier at ``--sitemap-depth``.
A sitemap request's ``parent_url`` is the robots.txt that named it (directly
or through an index), or the index / origin for ``/sitemap.xml``: it decides
which URLs the sitemap may list (sitemaps.org "Sitemap file location").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from trawler.linkfilter import LinkFilter
from trawler.records import CrawlRequest, FetchResult
from trawler.sitemaps import allowed_by_location, parse_sitemap, sitemap_urls_from_robots

ROBOTS_SUFFIX = "/robots.txt"


def sitemaps_of_origin(site: str, listed: list[str], links: LinkFilter) -> list[CrawlRequest]:
    """Sitemap requests for an origin: those robots.txt lists, else /sitemap.xml."""
    robots_url = site + ROBOTS_SUFFIX
    requests = []
    for url in sitemap_urls_from_robots(listed, site):
        normalised = links.normalise(url)
        if normalised is None or links.reject_reason(normalised) is not None:
            continue
        parent = robots_url if url in listed else site + "/"
        requests.append(replace(links.request(normalised, 0, parent), kind="sitemap"))
    return requests


def sitemap_outcome(
    request: CrawlRequest, result: FetchResult, links: LinkFilter, depth: int, counters: Counter
) -> tuple[list[CrawlRequest], int]:
    """The requests a fetched sitemap adds (child sitemaps, listed URLs) and how many it listed."""
    doc = parse_sitemap(result.body, result.final_url)
    counters["sitemaps.fetched"] += 1
    if doc.error:
        counters[f"sitemaps.error.{doc.error}"] += 1
    from_robots = (request.parent_url or "").endswith(ROBOTS_SUFFIX)
    out: list[CrawlRequest] = []
    for child in doc.sitemaps:
        url = links.normalise(child)
        if url is None or not allowed_by_location(result.final_url, url, from_robots):
            continue
        if links.reject_reason(url) is None:
            parent = request.parent_url if from_robots else request.url
            out.append(replace(links.request(url, 0, parent), kind="sitemap"))
    for entry in doc.urls:
        url = links.normalise(entry.loc)
        if url is None or not allowed_by_location(result.final_url, url, from_robots):
            counters["sitemaps.rejected_location"] += 1
            continue
        reason = links.reject_reason(url)
        if reason is not None or (links.max_depth is not None and depth > links.max_depth):
            links.rejected[reason or "max_depth"] += 1
            links.skipped.append((url, reason or "max_depth", None))
            continue
        listed = links.request(url, depth, request.url)
        out.append(replace(listed, lastmod=entry.lastmod, changefreq=entry.changefreq))
    counters["sitemaps.urls"] += len(doc.urls)
    return out, len(doc.urls) + len(doc.sitemaps)
