"""Budgets over all the workers of a distributed job (issue 17): three workers on
one job store exactly its --max-pages-per-host pages of each host, and the web
server saw exactly that many page requests per host."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.backends import DistributedCrawls, close_backend, writer_of
from tests.e2e.conftest import Served, start_testsite


@pytest.fixture
def three_workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DistributedCrawls]:
    redis_url = request.getfixturevalue("redis_url")
    postgres = request.getfixturevalue("postgres_server")
    database = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    backend = DistributedCrawls(tmp_path, redis_url, database, worker_count=3)
    yield backend
    close_backend(backend)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Served]:
    served = start_testsite(tmp_path, hosts=3, pages=15)
    yield served
    served.process.terminate()
    served.process.wait(10)


def test_three_workers_store_exactly_the_per_host_budget(
    three_workers: DistributedCrawls, site: Served
) -> None:
    # A delay keeps each host busy long enough that every worker takes hosts.
    crawled = three_workers.crawl(site.seeds, "--no-sitemaps", "--scope", "any",
                                  "--max-pages-per-host", "5", "--delay", "0.3")  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    rows = crawled.export()
    stored = Counter(row["url"].split("/")[2] for row in rows)
    requested = Counter(e["host"] for e in site.log() if e["path"] != "/robots.txt")
    assert len(stored) == 3 and set(stored.values()) == {5}, stored
    assert set(requested.values()) == {5} and len(requested) == 3, requested
    assert len({writer_of(row) for row in rows}) >= 2  # the budget held between workers
    assert crawled.stats()["pages_stored"] == 15
