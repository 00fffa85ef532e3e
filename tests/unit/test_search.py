"""Unit tests for trawler.store.search: FTS5 search over a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trawler.store import sqlite as db
from trawler.store.search import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    SearchIndexMissing,
    ensure_search_schema,
    index_pages,
    index_pages_after,
    last_page_id,
    rebuild_search_index,
    search,
    split_highlights,
    to_fts_query,
)

DAY = 86_400.0
T0 = 1_700_000_000.0


def _page(url: str, text: str, **fields: object) -> dict:
    host = url.split("/")[2]
    page = {"url": url, "final_url": url, "status": 200, "title": None, "description": None}
    page |= {"text": text, "fetched_at": T0, "noindex": 0, "error": None, "host": host}
    return page | fields


def _commit(conn: sqlite3.Connection, pages: list[dict]) -> int:
    """What the embedded commit does: insert the pages, index the new ones, one transaction."""
    with conn:
        after = last_page_id(conn)
        for page in pages:
            columns = ", ".join(page)
            conn.execute(
                f"INSERT INTO pages ({columns}) VALUES ({', '.join('?' for _ in page)})"
                " ON CONFLICT(url) DO NOTHING",
                tuple(page.values()),
            )
        return index_pages_after(conn, after)


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    connection = db.connect(tmp_path)
    ensure_search_schema(connection)
    yield connection
    connection.close()


def _urls(hits: list) -> list[str]:
    return [hit.url for hit in hits]


def test_ranking_prefers_title_and_frequent_mentions(conn: sqlite3.Connection) -> None:
    _commit(
        conn,
        [
            _page("http://a.test/once", "the harbour has a lighthouse and many boats " * 3),
            _page("http://a.test/none", "nothing about towers here, only boats"),
            _page(
                "http://a.test/many",
                "lighthouse keepers tend the lighthouse lamp; every lighthouse needs one",
                title="Lighthouse keepers",
            ),
        ],
    )
    hits = search(conn, "lighthouse")
    assert _urls(hits) == ["http://a.test/many", "http://a.test/once"]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].title == "Lighthouse keepers" and hits[0].host == "a.test"
    assert hits[0].fetched_at == T0


def test_snippet_highlights_the_matched_terms(conn: sqlite3.Connection) -> None:
    _commit(conn, [_page("http://a.test/", "Old boats rest in the quiet harbour at night.")])
    (hit,) = search(conn, "HARBOUR")
    assert f"{HIGHLIGHT_START}harbour{HIGHLIGHT_END}" in hit.snippet
    assert ("harbour", True) in split_highlights(hit.snippet)
    assert split_highlights("a **b** c") == [("a ", False), ("b", True), (" c", False)]


def test_filters_by_host_and_fetch_date(conn: sqlite3.Connection) -> None:
    _commit(
        conn,
        [
            _page("http://a.test/1", "tide tables", fetched_at=T0),
            _page("http://b.test/1", "tide tables", fetched_at=T0 + DAY),
            _page("http://b.test/2", "tide tables", fetched_at=T0 + 2 * DAY),
        ],
    )
    assert _urls(search(conn, "tide", host="a.test")) == ["http://a.test/1"]
    assert len(search(conn, "tide", host="b.test")) == 2
    assert search(conn, "tide", host="c.test") == []
    assert _urls(search(conn, "tide", since=T0 + DAY, until=T0 + 2 * DAY)) == ["http://b.test/1"]
    assert len(search(conn, "tide", since=T0)) == 3
    assert len(search(conn, "tide", limit=2)) == 2


def test_noindex_pages_and_errors_are_not_searchable(conn: sqlite3.Connection) -> None:
    indexed = _commit(
        conn,
        [
            _page("http://a.test/ok", "mackerel shoal"),
            _page("http://a.test/noindex", "mackerel shoal", noindex=1),
            _page("http://a.test/404", "mackerel shoal not found", status=404),
            _page("http://a.test/err", "mackerel shoal", status=None, error="timeout"),
            _page("http://a.test/empty", None),
        ],
    )
    assert indexed == 1
    assert _urls(search(conn, "mackerel")) == ["http://a.test/ok"]


def test_a_duplicate_is_found_by_the_text_its_original_lacks(conn: sqlite3.Connection) -> None:
    """Duplicates are indexed (a wrong flag must not hide a page's own text), and a
    result list shows a duplicate only when its original does not match."""
    original, dup = "http://a.test/ok", "http://b.test/dup"
    indexed = _commit(conn, [
        _page(original, "mackerel shoal off the pier"),
        _page(dup, "mackerel shoal off the jetty", duplicate_of=original),
        _page("http://b.test/orphan", "mackerel wreck", duplicate_of="http://c.test/never"),
    ])  # fmt: skip
    assert indexed == 3
    assert _urls(search(conn, "mackerel shoal")) == [original]
    assert _urls(search(conn, "jetty")) == [dup]
    assert _urls(search(conn, "pier")) == [original]
    assert _urls(search(conn, "wreck")) == ["http://b.test/orphan"]  # its original not stored
    on_b = search(conn, "mackerel", host="b.test")  # its original is filtered out
    assert sorted(_urls(on_b)) == [dup, "http://b.test/orphan"]


def test_a_url_stored_twice_is_indexed_once(conn: sqlite3.Connection) -> None:
    assert _commit(conn, [_page("http://a.test/", "herring")]) == 1
    assert _commit(conn, [_page("http://a.test/", "herring"), _page("http://b.test/", "x")]) == 1
    assert len(search(conn, "herring")) == 1
    matches = "SELECT count(*) FROM pages_fts WHERE pages_fts MATCH 'herring'"
    assert conn.execute(matches).fetchone()[0] == 1


def test_diacritics_and_case_are_folded(conn: sqlite3.Connection) -> None:
    _commit(
        conn,
        [
            _page("http://a.test/accent", "Un petit Café sur le quai"),
            _page("http://a.test/plain", "the harbour cafe opens early"),
        ],
    )
    assert set(_urls(search(conn, "cafe"))) == {"http://a.test/accent", "http://a.test/plain"}
    assert set(_urls(search(conn, "CAFÉ"))) == {"http://a.test/accent", "http://a.test/plain"}


def test_query_syntax_phrases_exclusion_prefix(conn: sqlite3.Connection) -> None:
    _commit(
        conn,
        [
            _page("http://a.test/1", "the pilot boat left the harbour"),
            _page("http://a.test/2", "the harbour pilot boarded the boat"),
            _page("http://a.test/3", "pilotage fees for the harbour"),
        ],
    )
    assert _urls(search(conn, '"pilot boat"')) == ["http://a.test/1"]
    assert set(_urls(search(conn, "harbour -boat"))) == {"http://a.test/3"}
    not_the_phrase = search(conn, 'harbour -"pilot boat"')
    assert set(_urls(not_the_phrase)) == {"http://a.test/2", "http://a.test/3"}
    assert len(search(conn, "pilot*")) == 3
    assert len(search(conn, "pilot")) == 2
    assert len(search(conn, "pilot boat harbour")) == 2


HOSTILE = [
    'foo "bar',
    "AND OR (",
    "NOT",
    "NEAR(a b",
    '"',
    '""',
    "*",
    "-",
    "- -",
    "title:pilot",
    "^pilot",
    "pilot OR",
    ")))(((",
    "'; DROP TABLE pages; --",
    "a\x00b",
    "{text}: x",
    "pilot\"boat'",
    "-- pilot",
    "🚢 ⚓",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_do_not_raise(conn: sqlite3.Connection, query: str) -> None:
    _commit(conn, [_page("http://a.test/", "the pilot boat, not a NOT or an AND")])
    assert isinstance(search(conn, query), list)


def test_operators_typed_by_a_user_are_searched_as_words(conn: sqlite3.Connection) -> None:
    _commit(conn, [_page("http://a.test/", "rock and roll"), _page("http://b.test/", "rock")])
    assert _urls(search(conn, "rock AND roll")) == ["http://a.test/"]
    assert to_fts_query('foo "bar') == '"foo" "bar"'
    assert to_fts_query("AND OR (") == '"AND" "OR"'
    assert to_fts_query('pi* -"x y" z') == '("pi"* "z") NOT "x y"'
    assert to_fts_query("-only -exclusions") is None


def test_empty_results(conn: sqlite3.Connection) -> None:
    assert search(conn, "anything") == []  # no pages at all
    _commit(conn, [_page("http://a.test/", "quay")])
    assert search(conn, "wharf") == []
    assert search(conn, "") == [] and search(conn, "   ") == []
    assert search(conn, "quay", limit=0) == []


def test_raw_mode_passes_fts5_syntax_and_reports_errors(conn: sqlite3.Connection) -> None:
    _commit(conn, [_page("http://a.test/", "keel"), _page("http://b.test/", "hull")])
    assert len(search(conn, "keel OR hull", raw=True)) == 2
    with pytest.raises(ValueError, match="invalid FTS5 query"):
        search(conn, 'keel "', raw=True)


def test_schema_is_idempotent_and_backfills_an_old_database(tmp_path: Path) -> None:
    old = db.connect(tmp_path)
    with old:
        old.execute("DROP TABLE pages_fts")  # a data directory from before search existed
        old.execute(
            "INSERT INTO pages (url, status, title, text, noindex) VALUES"
            " ('http://a.test/1', 200, 'Buoy', 'red buoy', 0),"
            " ('http://a.test/2', 200, 'Buoy', 'hidden buoy', 1)"
        )
    ensure_search_schema(old)
    ensure_search_schema(old)
    columns = {row[1] for row in old.execute("PRAGMA table_info(pages)")}
    assert {"host", "simhash", "text_hash", "duplicate_of"} <= columns
    assert _urls(search(old, "buoy")) == ["http://a.test/1"]
    assert rebuild_search_index(old) == 1
    assert _urls(search(old, "buoy")) == ["http://a.test/1"]
    old.close()


def test_index_pages_takes_explicit_rows(conn: sqlite3.Connection) -> None:
    with conn:
        conn.execute(
            "INSERT INTO pages (id, url, status, text, host) VALUES"
            " (7, 'http://a.test/', 200, 'capstan winch', 'a.test')"
        )
        index_pages(conn, [(7, None, None, "capstan winch"), (8, None, None, None)])
    assert _urls(search(conn, "winch")) == ["http://a.test/"]


def test_a_database_without_the_index_says_so(tmp_path: Path) -> None:
    writable = db.connect(tmp_path)
    writable.execute("DROP TABLE pages_fts")  # made before search existed
    writable.close()
    readonly = db.connect(tmp_path, readonly=True)
    with pytest.raises(SearchIndexMissing):
        search(readonly, "anything")
    readonly.close()


def _automerge(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT v FROM pages_fts_config WHERE k = 'automerge'").fetchone()
    return None if row is None else int(row[0])


def test_the_index_merges_its_segments_sixteen_at_a_time(tmp_path: Path) -> None:
    """Issue 14: FTS5's default merges 4 segments at a time, rewriting each page's terms
    about twice as often; at 16 a page costs ~25 % less to index, the same answers.
    An index made before gets the setting when a writer opens it."""
    conn = db.connect(tmp_path)
    assert _automerge(conn) == 16
    conn.execute("DELETE FROM pages_fts_config WHERE k = 'automerge'")  # as made before
    conn.commit()
    conn.close()
    conn = db.connect(tmp_path)
    assert _automerge(conn) == 16
    for i in range(60):  # a commit each: 60 segments to merge
        _commit(conn, [_page(f"http://a.test/{i}", f"harbour pilot {i} " + "quay " * (i % 7))])
    segments = conn.execute("SELECT count(*) FROM pages_fts_data").fetchone()[0]
    assert len(search(conn, "harbour", limit=100)) == 60
    assert _urls(search(conn, '"pilot 17"')) == ["http://a.test/17"]
    assert rebuild_search_index(conn) == 60  # one segment: the same answers
    assert len(search(conn, "harbour", limit=100)) == 60
    assert _urls(search(conn, '"pilot 17"')) == ["http://a.test/17"]
    assert conn.execute("SELECT count(*) FROM pages_fts_data").fetchone()[0] < segments
    conn.close()
