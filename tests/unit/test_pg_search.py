"""Full-text search over PostgreSQL (issue 17, store/pg_search.py) against a real
server: pages stored by the distributed store's own commit, the answers of the
embedded search (tests/unit/test_search.py) for the same pages."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.servers import PostgresServer
from tests.unit.test_pg_totals import _as_version_6
from tests.unit.test_search import HOSTILE
from trawler.config import CrawlConfig
from trawler.records import PageRecord
from trawler.store import pg_search
from trawler.store.pgschema_steps import SEARCH_TEXT_CHARS
from trawler.store.postgres import PostgresStore
from trawler.store.search import HIGHLIGHT_END, HIGHLIGHT_START, SNIPPET_ELLIPSIS, SearchHit

DAY = 86_400.0
T0 = 1_700_000_000.0


def _page(url: str, text: str | None, **fields: object) -> PageRecord:
    record = PageRecord(
        url=url, final_url=url, status=200, content_type="text/html", content_length=100,
        depth=0, parent_url=None, title=None, description=None, keywords=None, text=text,
        links_count=0, content_sha256=None, fetched_at=T0, fetch_duration_s=0.1, error=None,
        host=url.split("/")[2],
    )  # fmt: skip
    return dataclasses.replace(record, **fields)  # type: ignore[arg-type]


class Pages:
    """One job's pages, stored as a worker stores them; searched as the readers do."""

    def __init__(self, store: PostgresStore, url: str, job_id: str) -> None:
        self.store, self.job_id = store, job_id
        self.conn = psycopg.connect(url, autocommit=True)

    async def commit(self, pages: list[PageRecord]) -> None:
        await self.store.store_batch(self.job_id, pages)

    def search(self, query: str, **options: object) -> list[SearchHit]:
        return pg_search.search(self.conn, self.job_id, query, **options)  # type: ignore[arg-type]

    def urls(self, query: str, **options: object) -> list[str]:
        hits = self.search(query, **options)
        assert pg_search.count_matches(
            self.conn, self.job_id, query, **{k: v for k, v in options.items() if k != "limit"}
        ) >= len(hits)  # type: ignore[arg-type]
        return [hit.url for hit in hits]


@pytest.fixture
async def pages(fresh_postgres_url: str) -> AsyncIterator[Pages]:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job = await store.create_job(CrawlConfig(), "running")
        searched = Pages(store, fresh_postgres_url, job)
        yield searched
        searched.conn.close()


async def test_ranking_prefers_title_and_frequent_mentions(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/once", "the harbour has a lighthouse and many boats " * 3),
        _page("http://a.test/none", "nothing about towers here, only boats"),
        _page("http://a.test/many", "lighthouse keepers tend the lighthouse lamp; every"
              " lighthouse needs one", title="Lighthouse keepers"),
    ])  # fmt: skip
    hits = pages.search("lighthouse")
    assert [h.url for h in hits] == ["http://a.test/many", "http://a.test/once"]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].title == "Lighthouse keepers" and hits[0].host == "a.test"
    assert hits[0].fetched_at == T0


async def test_a_title_match_outranks_a_description_match_outranks_text(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/text", "a word about the dredger"),
        _page("http://a.test/title", "a word about it", title="The dredger"),
        _page("http://a.test/description", "a word about it", description="A dredger"),
    ])  # fmt: skip
    assert pages.urls("dredger") == [
        "http://a.test/title", "http://a.test/description", "http://a.test/text"]  # fmt: skip


async def test_snippet_highlights_the_matched_terms(pages: Pages) -> None:
    long_text = " ".join(f"filler{i}" for i in range(40))
    await pages.commit([
        _page("http://a.test/", "Old boats rest in the quiet harbour at night."),
        _page("http://b.test/", f"{long_text} the harbour wall {long_text}"),
        _page("http://c.test/", "nothing to see", title="Harbour master"),
    ])  # fmt: skip
    snippets = {h.url: h.snippet for h in pages.search("HARBOUR")}
    mark = f"{HIGHLIGHT_START}harbour{HIGHLIGHT_END}"
    assert snippets["http://a.test/"] == f"Old boats rest in the quiet {mark} at night."
    middle = snippets["http://b.test/"]  # cut out of a long text: ellipses on both sides
    assert mark in middle and middle.startswith(SNIPPET_ELLIPSIS)
    assert middle.endswith(SNIPPET_ELLIPSIS) and len(middle.split()) <= 18
    assert snippets["http://c.test/"] == f"{HIGHLIGHT_START}Harbour{HIGHLIGHT_END} master"


async def test_filters_by_host_and_fetch_date(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/1", "tide tables", fetched_at=T0),
        _page("http://b.test/1", "tide tables", fetched_at=T0 + DAY),
        _page("http://b.test/2", "tide tables", fetched_at=T0 + 2 * DAY),
    ])  # fmt: skip
    assert pages.urls("tide", host="a.test") == ["http://a.test/1"]
    assert len(pages.urls("tide", host="b.test")) == 2
    assert pages.urls("tide", host="c.test") == [] and pages.urls("tide", host="a\x00") == []
    assert pages.urls("tide", since=T0 + DAY, until=T0 + 2 * DAY) == ["http://b.test/1"]
    assert len(pages.urls("tide", since=T0)) == 3
    assert len(pages.urls("tide", limit=2)) == 2
    assert pg_search.count_matches(pages.conn, pages.job_id, "tide") == 3


async def test_noindex_pages_and_errors_are_not_searchable(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/ok", "mackerel shoal"),
        _page("http://a.test/noindex", "mackerel shoal", noindex=True),
        _page("http://a.test/404", "mackerel shoal not found", status=404),
        _page("http://a.test/err", "mackerel shoal", status=None, error="timeout"),
        _page("http://a.test/empty", None),
    ])  # fmt: skip
    assert pages.urls("mackerel") == ["http://a.test/ok"]
    indexed = "SELECT count(*) FROM pages WHERE search_vector IS NOT NULL"
    assert pages.conn.execute(indexed).fetchone() == (2,)  # the ok page and the empty one


async def test_a_duplicate_is_found_by_the_text_its_original_lacks(pages: Pages) -> None:
    original, dup = "http://a.test/ok", "http://b.test/dup"
    await pages.commit([
        _page(original, "mackerel shoal off the pier"),
        _page(dup, "mackerel shoal off the jetty", duplicate_of=original),
        _page("http://b.test/orphan", "mackerel wreck", duplicate_of="http://c.test/never"),
    ])  # fmt: skip
    assert pages.urls("mackerel shoal") == [original]
    assert pages.urls("jetty") == [dup]
    assert pages.urls("pier") == [original]
    assert pages.urls("wreck") == ["http://b.test/orphan"]  # its original not stored
    on_b = pages.urls("mackerel", host="b.test")  # its original is filtered out
    assert sorted(on_b) == [dup, "http://b.test/orphan"]
    assert pg_search.count_matches(pages.conn, pages.job_id, "mackerel") == 2


async def test_jobs_are_searched_apart(pages: Pages) -> None:
    other = await pages.store.create_job(CrawlConfig(), "running")
    await pages.store.store_batch(other, [_page("http://a.test/", "herring")])
    await pages.commit([_page("http://a.test/", "sprat")])
    assert pages.urls("herring") == [] and pages.urls("sprat") == ["http://a.test/"]


async def test_diacritics_and_case_are_folded(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/accent", "Un petit CAFÉ sur le quai"),
        _page("http://a.test/plain", "the harbour cafe opens early"),
        _page("http://a.test/zoo", "Ñandú in ZÜRICH"),
    ])  # fmt: skip
    both = {"http://a.test/accent", "http://a.test/plain"}
    assert set(pages.urls("cafe")) == both and set(pages.urls("Café")) == both
    assert pages.urls("zurich nandu") == ["http://a.test/zoo"]  # capitals: a C-locale database
    assert pages.urls("Zürich") == ["http://a.test/zoo"]


async def test_query_syntax_phrases_exclusion_prefix(pages: Pages) -> None:
    await pages.commit([
        _page("http://a.test/1", "the pilot boat left the harbour"),
        _page("http://a.test/2", "the harbour pilot boarded the boat"),
        _page("http://a.test/3", "pilotage fees for the harbour"),
    ])  # fmt: skip
    assert pages.urls('"pilot boat"') == ["http://a.test/1"]
    assert set(pages.urls("harbour -boat")) == {"http://a.test/3"}
    assert set(pages.urls('harbour -"pilot boat"')) == {"http://a.test/2", "http://a.test/3"}
    assert len(pages.urls("pilot*")) == 3 and len(pages.urls("pilot")) == 2
    assert set(pages.urls("harbour -pilotag*")) == {"http://a.test/1", "http://a.test/2"}
    assert len(pages.urls("pilot boat harbour")) == 2
    assert pages.urls("-pilot") == []  # exclusions alone find nothing, as embedded


@pytest.mark.parametrize("query", [*HOSTILE, "a\\b*", "it's*", "'*", "\\*"])
async def test_hostile_queries_do_not_raise(pages: Pages, query: str) -> None:
    await pages.commit([_page("http://a.test/", "the pilot boat, not a NOT or an AND")])
    assert isinstance(pages.search(query), list)
    assert pg_search.count_matches(pages.conn, pages.job_id, query) >= 0


async def test_operators_typed_by_a_user_are_searched_as_words(pages: Pages) -> None:
    await pages.commit([_page("http://a.test/", "rock and roll"), _page("http://b.test/", "rock")])
    assert pages.urls("rock AND roll") == ["http://a.test/"]
    assert pages.urls("rock OR roll") == []  # "or" is a word, in no page
    assert pages.urls("rock -roll") == ["http://b.test/"]
    assert pg_search.to_pg_query("-only -exclusions") is None
    assert pg_search.to_pg_query("*  -") is None


async def test_empty_results(pages: Pages) -> None:
    assert pages.search("anything") == []  # no pages at all
    await pages.commit([_page("http://a.test/", "quay")])
    assert pages.search("wharf") == []
    assert pages.search("") == [] and pages.search("   ") == []
    assert pages.search("quay", limit=0) == []


async def test_raw_mode_passes_tsquery_syntax_and_reports_errors(pages: Pages) -> None:
    await pages.commit([_page("http://a.test/", "keel"), _page("http://b.test/", "hull")])
    assert len(pages.search("keel | hull", raw=True)) == 2
    with pytest.raises(ValueError, match="invalid tsquery"):
        pages.search("keel &", raw=True)
    assert len(pages.search("keel | hull", raw=True)) == 2  # the connection still works


async def test_a_huge_page_is_stored_and_found_by_its_start(pages: Pages) -> None:
    """A tsvector holds 1 MB of lexemes: the text is indexed up to SEARCH_TEXT_CHARS,
    and the page is stored whatever its length (an error would fail its batch)."""
    words = " ".join(f"w{i:07d}" for i in range(300_000))  # 2.7 MB, all distinct
    await pages.commit([_page("http://a.test/huge", "anchorword " + words)])
    assert pages.urls("anchorword") == ["http://a.test/huge"]
    assert pages.urls("w0000001") == ["http://a.test/huge"]
    late = f"w{SEARCH_TEXT_CHARS // 9 + 10:07d}"  # 9 characters a word
    assert pages.urls(late) == []


async def test_pages_stored_before_the_migration_are_indexed(fresh_postgres_url: str) -> None:
    async with await PostgresStore.connect(fresh_postgres_url) as store:
        job = await store.create_job(CrawlConfig(), "running")
        await store.store_batch(
            job,
            [
                _page("http://a.test/old", "ballast"),
                _page("http://a.test/hidden", "ballast", noindex=True),
            ],
        )
    _as_version_6(fresh_postgres_url)  # undoes the search migration too
    async with await PostgresStore.connect(fresh_postgres_url) as store:  # migrates
        await store.store_batch(job, [_page("http://a.test/new", "ballast tank")])
    with psycopg.connect(fresh_postgres_url) as conn:
        hits = pg_search.search(conn, job, "ballast")
        assert sorted(h.url for h in hits) == ["http://a.test/new", "http://a.test/old"]


async def test_the_gin_index_answers_the_query(pages: Pages) -> None:
    await pages.commit([_page(f"http://a.test/{i}", f"word{i} common") for i in range(300)])
    pages.conn.execute("SET enable_seqscan = off")  # 300 rows: a scan would be cheaper
    expression, params = pg_search.to_pg_query("word17") or ("", [])
    plan = pages.conn.execute(
        f"EXPLAIN SELECT id FROM pages WHERE search_vector @@ {expression}", params
    ).fetchall()
    assert "pages_search" in " ".join(row[0] for row in plan)


async def test_a_database_not_in_utf8_is_searched_unfolded(postgres_server: PostgresServer) -> None:
    """normalize() needs UTF8: in another encoding the migration makes a fold that
    only lowers, and the schema is made all the same."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url_for("postgres"), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0")
    url = postgres_server.url_for(name)
    async with await PostgresStore.connect(url) as store:
        job = await store.create_job(CrawlConfig(), "running")
        await store.store_batch(job, [_page("http://a.test/", "Harbour Pilots")])
    with psycopg.connect(url) as conn:  # (text comes back as bytes in SQL_ASCII: counted)
        assert pg_search.count_matches(conn, job, "PILOTS") == 1
        assert pg_search.count_matches(conn, job, "pilot") == 0
