"""URLs refused for their host's page budget are counted alike on both backends
(issue 17): distributed, the budget is reserved job-wide in Redis
(frontier/redis_budget.py), and the URLs its COMMIT refuses count in the job's
``rejected.host_budget`` like the ones a worker's own link filter refuses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.backends import DistributedCrawls, EmbeddedCrawls, close_backend
from tests.e2e.scripted import Scripted, page, start_scripted

PAGES = 10


def links(count: int) -> str:
    anchors = "".join(f'<a href="/p{i}">p{i}</a> ' for i in range(count))
    return f"<html><head><title>t</title></head><body>{anchors}</body></html>"


@pytest.fixture
def ten_pages(tmp_path: Path) -> Iterator[Scripted]:
    """One host: a home page and 10 pages, each linking all 10."""
    script = {
        "0": {"/": page(links(PAGES)), **{f"/p{i}": page(links(PAGES)) for i in range(PAGES)}}
    }
    server = start_scripted(tmp_path, script)
    yield server
    server.stop()


@pytest.fixture
def distributed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DistributedCrawls]:
    postgres = request.getfixturevalue("postgres_server")
    database = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    backend = DistributedCrawls(tmp_path, request.getfixturevalue("redis_url"), database)
    yield backend
    close_backend(backend)


def refused(backend: EmbeddedCrawls | DistributedCrawls, site: Scripted) -> tuple[int, int]:
    """(rejected.host_budget, pages requested) of a crawl with --max-pages-per-host 3."""
    before = len(site.paths())
    crawled = backend.crawl([site.bases[0] + "/"], "--delay", "0", "--no-sitemaps",
                            "--max-pages-per-host", "3")  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    requested = [p for p in site.paths()[before:] if p != "/robots.txt"]
    return crawled.stats()["counters"].get("rejected.host_budget", 0), len(requested)


def test_host_budget_refusals_counted_alike(
    distributed: DistributedCrawls, ten_pages: Scripted, tmp_path: Path
) -> None:
    embedded = refused(EmbeddedCrawls(tmp_path / "embedded"), ten_pages)
    # The home page and two of the 10 it links are admitted; each of the other 8 is
    # refused once (then seen: found again on the pages fetched, it is not new).
    assert embedded == (PAGES - 2, 3), embedded
    assert refused(distributed, ten_pages) == embedded
