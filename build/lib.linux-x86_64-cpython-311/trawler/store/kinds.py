"""Kinds of archived fetches, as export rows name them, for both stores.

- ``page``: a URL of the crawl (HTML or not), a row per URL (table ``pages``);
- ``sitemap``: a sitemap file, crawled like a page (also ``pages``);
- ``robots``: a robots.txt download, a row per fetch (table ``robots_fetches``):
  retries after a 5xx and the refetch after 24 hours each have their own WARC
  records, so each has its own row.

Exports take pages and sitemaps by default (the rows they always had, with the
``kind`` column added) and robots.txt fetches when asked (``--kind``). Rows of
both tables are merged by fetch time, each table streamed in its own order, so
memory stays flat.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import fields

from trawler.records import RobotsRecord

PAGE, SITEMAP, ROBOTS = "page", "sitemap", "robots"
EXPORT_KINDS = (PAGE, SITEMAP, ROBOTS)
DEFAULT_EXPORT_KINDS = frozenset({PAGE, SITEMAP})
ROBOTS_COLUMNS = tuple(f.name for f in fields(RobotsRecord))


def parse_kinds(text: str) -> frozenset[str]:
    """``page,sitemap,robots`` (any of them, comma-separated) or ``all``; ValueError else."""
    names = {name.strip().lower() for name in text.split(",") if name.strip()}
    if names == {"all"}:
        return frozenset(EXPORT_KINDS)
    unknown = names - set(EXPORT_KINDS)
    if unknown or not names:
        wrong = ", ".join(sorted(unknown)) or "nothing"
        raise ValueError(f"--kind takes {', '.join(EXPORT_KINDS)} or all, not {wrong}")
    return frozenset(names)


def robots_export_row(values: Iterable, columns: tuple[str, ...]) -> dict:
    """An export row (``columns``) for a robots.txt fetch; page-only fields are None."""
    row = dict.fromkeys(columns)
    row.update(zip(ROBOTS_COLUMNS, values, strict=True))
    row["noindex"] = False
    row["kind"] = ROBOTS
    return {name: row[name] for name in columns}


def _fetch_time(row: dict) -> float:
    return row["fetched_at"] or 0.0


def merge_rows(pages: Iterator[dict], robots: Iterator[dict]) -> Iterator[dict]:
    """Both streams in one, by fetch time (each keeps its own order)."""
    return heapq.merge(pages, robots, key=_fetch_time)


async def amerge_rows(
    pages: AsyncIterator[dict], robots: AsyncIterator[dict]
) -> AsyncIterator[dict]:
    """``merge_rows`` for two async streams."""
    page, robot = await anext(pages, None), await anext(robots, None)
    while page is not None or robot is not None:
        if robot is None or page is not None and _fetch_time(page) <= _fetch_time(robot):
            assert page is not None
            yield page
            page = await anext(pages, None)
        else:
            yield robot
            robot = await anext(robots, None)
