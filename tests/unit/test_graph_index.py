"""The link graph's inbound index in the embedded store: dropped while a crawl writes
(random fingerprints made every commit rewrite most of its leaves), built when the
crawl's store closes; counts read the table meanwhile, within a time budget."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.store import sqlite as db
from trawler.store import sqlite_graph
from trawler.store.embedded import EmbeddedBackend

TARGET = "http://a.test/target"


def fill(conn: sqlite3.Connection, pages: int, links_each: int) -> None:
    """``pages`` pages each linking ``links_each`` times to other URLs and once to TARGET."""
    conn.executemany(
        "INSERT INTO pages (url, final_url, depth, host, links_count)"
        " VALUES (?, ?, 0, 'a.test', 0)",
        [(f"http://a.test/p{n}", f"http://a.test/p{n}") for n in range(pages)],
    )
    ids = [row[0] for row in conn.execute("SELECT id FROM pages ORDER BY id")]
    edges = [
        (page_id, url, url_fingerprint(url), None, None, None)
        for page_id in ids
        for url in [TARGET, *(f"http://a.test/x{page_id}-{k}" for k in range(links_each))]
    ]
    conn.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?, ?)", edges)
    conn.commit()


async def test_a_crawl_writes_without_the_index_and_builds_it_as_it_closes(
    tmp_path: Path,
) -> None:
    conn = db.connect(tmp_path)
    sqlite_graph.build_index(conn)  # a data directory a crawl closed before
    conn.close()
    backend = EmbeddedBackend(tmp_path)
    config = CrawlConfig(delay_s=0, allow_private=True)
    backend.store.create_job(config)
    await backend.open(config)
    with sqlite3.connect(tmp_path / db.DB_NAME) as reader:
        assert not sqlite_graph.has_index(reader)  # while the crawl writes
    await backend.close()
    with sqlite3.connect(tmp_path / db.DB_NAME) as reader:
        assert sqlite_graph.has_index(reader)


def test_counts_read_the_table_without_the_index_and_agree_with_it(tmp_path: Path) -> None:
    conn = db.connect(tmp_path)
    fill(conn, pages=30, links_each=3)
    sqlite_graph.pause_index(conn)
    without = sqlite_graph.inbound_report(conn, TARGET)
    sqlite_graph.build_index(conn)
    assert sqlite_graph.has_index(conn)
    with_index = sqlite_graph.inbound_report(conn, TARGET)
    assert without == with_index
    assert with_index["inbound_links"] == 30
    assert with_index["linked_from"] == [f"http://a.test/p{n}" for n in range(10)]


def test_a_scan_past_its_budget_leaves_the_count_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = db.connect(tmp_path)
    fill(conn, pages=2000, links_each=10)  # ~22,000 edges: more VM steps than one check
    sqlite_graph.pause_index(conn)
    monkeypatch.setattr(sqlite_graph, "SCAN_BUDGET_S", 0.0)
    assert sqlite_graph.inbound_report(conn, TARGET) == {"inbound_links": None, "linked_from": []}
    # The connection is left as it was: no handler interrupts the next statement.
    assert conn.execute("SELECT count(*) FROM links").fetchone()[0] == 2000 * 11
