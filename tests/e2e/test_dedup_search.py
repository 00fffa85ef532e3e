"""Duplicate content and full-text search, end to end."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from tests.e2e.backends import CrawlBackend
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import Served, job_data, run_trawler
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.indexpages import index_html
from trawler.sitegen import _WORDS

VOCABULARY = [f"{word}{i}" for i in range(30) for word in _WORDS]


def article(words: list[str], nav: str = "Home About Contact", footer: str = "(c) 2026") -> str:
    return (f"<html><head><title>{words[0]}</title></head><body><nav>{nav}</nav>"
            f"<p>{' '.join(words)}</p><footer>{footer}</footer></body></html>")  # fmt: skip


def duplicates_site(tmp_path: Path) -> tuple[Scripted, list[str]]:
    """An article, its exact copy, a one-word edit, the same text in other chrome, another."""
    rng = random.Random(5)
    words = [rng.choice(VOCABULARY) for _ in range(600)]
    edited = list(words)
    edited[300] = "lighthousekeeper"  # one word changed
    other = [rng.choice(VOCABULARY) for _ in range(600)]
    home = "".join(f'<a href="/{p}">{p}</a>' for p in ("orig", "copy", "edit", "chrome", "other"))
    script = {"0": {
        "/": page(f"<html><body>{home}</body></html>"),
        "/orig": page(article(words)),
        "/copy": page(article(words)),  # exact duplicate
        "/edit": page(article(edited)),  # near duplicate
        "/chrome": page(article(words, nav="Shop Blog Careers Press", footer="Imprint Privacy")),
        "/other": page(article(other)),
    }}  # fmt: skip
    return start_scripted(tmp_path, script), words


COPIES = ("orig", "copy", "edit", "chrome")  # one text: the same, one word edited, other chrome


def test_duplicates_marked(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    server, _words = duplicates_site(tmp_path)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", "--concurrency",
                                      "1", "--no-sitemaps")  # fmt: skip
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    exported = crawled.export()  # in commit order
    rows = {r["url"].rsplit("/", 1)[1]: r for r in exported}
    # The first of the copies stored is the original (distributed: whichever worker
    # committed first; the index is shared: store/pg_dedup.py), the others its copies.
    copies = [r["url"] for r in exported if r["url"].rsplit("/", 1)[1] in COPIES]
    assert len(copies) == len(COPIES)
    assert rows[copies[0].rsplit("/", 1)[1]]["duplicate_of"] is None
    for name in COPIES:
        if rows[name]["url"] != copies[0]:
            assert rows[name]["duplicate_of"] == copies[0], name
    assert rows["other"]["duplicate_of"] is None
    assert all(len(r["simhash"]) == 16 for n, r in rows.items() if n)


def test_duplicates_left_out_of_search(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    server, words = duplicates_site(tmp_path)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", "--concurrency",
                                      "1", "--no-sitemaps")  # fmt: skip
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    exported = crawled.export()  # in commit order
    rows = {r["url"].rsplit("/", 1)[1]: r for r in exported}
    # The pages with the text: a flagged one is left out (its original matches too).
    # Distributed, a copy stored by the other worker is not flagged (a documented limit).
    unflagged = {rows[n]["url"] for n in COPIES if rows[n]["duplicate_of"] is None}
    hits = crawled.search(words[10])
    assert {h["url"] for h in hits} == unflagged and len(hits) == len(unflagged)
    # The first of the copies stored is the original, so it is searchable. Distributed,
    # that is whichever worker committed first: not always /orig (a worker that leased
    # /copy later may commit it sooner).
    first_stored = next(r["url"] for r in exported if r["url"].rsplit("/", 1)[1] in COPIES)
    assert first_stored in unflagged
    if crawl_backend.name == "embedded":  # one writer: every copy is flagged
        assert unflagged == {server.bases[0] + "/orig"}
    assert all("**" in hit["snippet"] for hit in hits)


def index_site(tmp_path: Path) -> tuple[Scripted, list[str]]:
    """Eight genindex-shaped pages, an article, the article with one word changed."""
    rng = random.Random(9)
    words = [rng.choice(VOCABULARY) for _ in range(600)]
    edited = list(words)
    edited[300] = "lighthousekeeper"
    paths = [f"/genindex-{letter}.html" for letter in "abcdefgh"] + ["/orig", "/edit"]
    home = "".join(f'<a href="{p}">{p}</a>' for p in paths)
    script = {"0": {"/": page(f"<html><body>{home}</body></html>"),
                    "/orig": page(article(words)), "/edit": page(article(edited))}}  # fmt: skip
    for letter in "abcdefgh":
        script["0"][f"/genindex-{letter}.html"] = page(index_html(letter))
    return start_scripted(tmp_path, script), words


def test_index_pages_are_not_duplicates(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    server, _words = index_site(tmp_path)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", "--no-sitemaps")
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    base = server.bases[0]
    rows = {r["url"].removeprefix(base): r for r in crawled.export()}  # in commit order
    flags = {path: row["duplicate_of"] for path, row in rows.items()}
    first, second = sorted(("/orig", "/edit"), key=list(rows).index)  # the first stored
    assert flags == {"/": None, first: None, second: base + first,
                     **{f"/genindex-{x}.html": None for x in "abcdefgh"}}  # fmt: skip


def test_a_flagged_page_stays_searchable(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    server, words = index_site(tmp_path)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", "--concurrency",
                                      "1", "--no-sitemaps")  # fmt: skip
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    base = server.bases[0]
    rows = {r["url"].removeprefix(base): r for r in crawled.export()}  # in commit order
    first, second = sorted(("/orig", "/edit"), key=list(rows).index)  # the first stored
    assert rows[second]["duplicate_of"] == base + first  # whichever worker stored them
    # Only /edit has the word: found, flagged or not; the words both have: the original.
    assert [h["url"] for h in crawled.search("lighthousekeeper")] == [base + "/edit"]
    assert [h["url"] for h in crawled.search(words[10])] == [base + first]
    if crawl_backend.name == "embedded":
        with sqlite3.connect(job_data(Path(crawled.source[1])) / "trawler.db") as conn:
            sql = "SELECT text FROM pages WHERE url = ?"
            kept = conn.execute(sql, (base + "/edit",)).fetchone()
        assert "lighthousekeeper" in kept[0]


def test_distinct_test_site_pages_are_not_flagged(
    crawl_backend: CrawlBackend, testsite: Served
) -> None:
    crawled = crawl_backend.crawl(testsite.seeds, "--scope", "any", "--delay", "0.02",
                                  "--no-sitemaps")  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    pages = [r for r in crawled.export() if r["simhash"]]
    flagged = [r for r in pages if r["duplicate_of"] and r["duplicate_of"] != r["canonical"]]
    assert len(pages) > 50
    assert len(flagged) / len(pages) < 0.01


def test_search_ranks_filters_and_excludes_noindex(
    crawl_backend: CrawlBackend, testsite: Served
) -> None:
    crawled = crawl_backend.crawl(testsite.seeds, "--scope", "any", "--delay", "0.02",
                                  "--no-sitemaps")  # fmt: skip
    assert crawled.returncode == 0, crawled.stderr
    title = next(r["title"] for r in crawled.export() if r["url"].endswith("/p/3.html"))
    term = title.split(": ")[1].split()[0]  # a word from a page title
    hits = crawled.search(term, "--limit", "50")
    assert hits and all({"url", "title", "snippet", "score"} <= set(h) for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert any("**" in h["snippet"] for h in hits)
    host = testsite.site.netloc(1)
    only = crawled.search(term, "--host", host, "--limit", "50")
    assert only and all(h["url"].startswith(f"http://{host}/") for h in only)
    assert crawled.search(term, "--since", "2999-01-01") == []
    assert crawled.search('AND OR ( "unclosed') == []  # hostile syntax is taken literally


# Not a crawl: an option's check.
def test_near_duplicate_bits_beyond_the_index_is_a_bad_option(tmp_path: Path) -> None:
    """16 passed validation, then the SimHash index refused it with a traceback."""
    out = run_trawler("crawl", "http://127.0.0.1:9/", "--data", str(tmp_path / "d"),
                      "--near-duplicate-bits", "16")  # fmt: skip
    assert "--near-duplicate-bits" in assert_one_line_error(out, 2)
