"""Near-duplicate detection end to end through the page path, without a server:
HTML → page_outcome (extraction, SimHash, MinHash sketch) → ContentDedup.

The index pages (tests/indexpages.py) are shaped like the Python docs'
genindex-*.html: before the confirm step 15 of 16 were flagged as duplicates
of each other while sharing ~1% of their word 3-shingles.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.indexpages import index_entries, index_html
from tests.unit.test_simhash import _brute_force_candidates
from trawler.config import CrawlConfig
from trawler.dedup import ContentDedup
from trawler.minhash import NEAR_DUPLICATE_JACCARD, similarity
from trawler.outcome import page_outcome
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.sitegen import Site, SiteSpec
from trawler.store import sqlite as db

# Every test twice: the index's lookup in C, then in numpy (tests/unit/conftest.py).
pytestmark = pytest.mark.usefixtures("lookup_path")

CONFIG = CrawlConfig()
LETTERS = "abcdefghijklmnop"


def fingerprinted(url: str, html: str) -> PageRecord:
    """The page row the crawl would store for ``html`` served at ``url``."""
    result = FetchResult(url=url, final_url=url, status=200, content_type="text/html",
                         body=html.encode(), raw_body=html.encode())  # fmt: skip
    return page_outcome(CrawlRequest(url, 0), result, CONFIG, "trawler").page


def checked(dedup: ContentDedup, pages: list[PageRecord]) -> dict[str, str | None]:
    for page in pages:
        dedup.check(page)
    return {page.url: page.duplicate_of for page in pages}


def one_word_changed(entries: list[str], rng: random.Random) -> list[str]:
    edited = list(entries)
    i = rng.randrange(len(edited))
    edited[i] = edited[i].replace("(", "(edited ", 1) if "(" in edited[i] else "edited"
    return edited


def edited_copy(url: str, letter: str) -> PageRecord:
    """The index page of ``letter`` with one word changed, served at ``url``."""
    return fingerprinted(
        url, index_html(letter, one_word_changed(index_entries(letter), random.Random(1)))
    )


def test_index_pages_sharing_only_boilerplate_are_not_flagged() -> None:
    pages = [fingerprinted(f"http://docs.test/genindex-{x}.html", index_html(x)) for x in LETTERS]
    flags = checked(ContentDedup(), pages)
    assert [url for url, original in flags.items() if original] == []


def test_an_index_page_with_one_word_changed_is_flagged() -> None:
    rng = random.Random(7)
    dedup = ContentDedup()
    for letter in LETTERS:
        entries = index_entries(letter)
        original = fingerprinted(f"http://docs.test/{letter}.html", index_html(letter, entries))
        copy = fingerprinted(f"http://mirror.test/{letter}.html",
                             index_html(letter, one_word_changed(entries, rng)))  # fmt: skip
        checked(dedup, [original, copy])
        assert original.duplicate_of is None
        assert copy.duplicate_of == original.url
        assert copy.text is not None and "edited" in copy.text  # its text is kept


def test_prose_with_one_word_changed_is_flagged_and_keeps_its_text() -> None:
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(3000)]
    body = [rng.choice(vocabulary) for _ in range(400)]
    edited = list(body)
    edited[200] = "lighthousekeeper"
    pages = [fingerprinted(f"http://a.test/{name}", f"<p>{' '.join(text)}</p>")
             for name, text in (("orig", body), ("edit", edited))]  # fmt: skip
    flags = checked(ContentDedup(), pages)
    assert flags == {"http://a.test/orig": None, "http://a.test/edit": "http://a.test/orig"}
    assert pages[1].text is not None and "lighthousekeeper" in pages[1].text


def test_rows_stored_without_a_sketch_are_never_near_duplicate_originals() -> None:
    """Data directories from before the sketch: their pages only count as exact copies."""
    stored = fingerprinted("http://a.test/old", index_html("a"))
    copy = fingerprinted("http://a.test/copy", index_html("a"))
    near = edited_copy("http://a.test/near", "a")
    dedup = ContentDedup()
    dedup.load([(stored.url, stored.text_hash, stored.simhash, None)])
    assert checked(dedup, [near, copy]) == {near.url: None, copy.url: stored.url}


def test_the_index_is_rebuilt_from_stored_rows() -> None:
    rng = random.Random(2)
    entries = index_entries("q")
    stored = fingerprinted("http://a.test/q", index_html("q", entries))
    others = [fingerprinted(f"http://a.test/{x}", index_html(x)) for x in LETTERS]
    dedup = ContentDedup()
    dedup.load((p.url, p.text_hash, p.simhash, p.minhash) for p in [stored, *others])
    near = fingerprinted("http://b.test/q", index_html("q", one_word_changed(entries, rng)))
    assert checked(dedup, [near]) == {near.url: stored.url}


def test_sketches_survive_the_embedded_store_and_rebuild_the_index(tmp_path: Path) -> None:
    entries = index_entries("r")
    stored = [fingerprinted("http://a.test/r", index_html("r", entries)),
              *(fingerprinted(f"http://a.test/{x}", index_html(x)) for x in LETTERS)]  # fmt: skip
    conn = db.connect(tmp_path)
    with conn:
        db.SqliteStore(conn).insert_pages(stored)
    dedup = ContentDedup()
    dedup.load(db.SqliteStore(conn).content_fingerprints())
    conn.close()
    near = fingerprinted("http://b.test/r",
                         index_html("r", one_word_changed(entries, random.Random(4))))  # fmt: skip
    assert checked(dedup, [near]) == {near.url: "http://a.test/r"}


def test_a_data_directory_from_before_sketches_is_migrated(tmp_path: Path) -> None:
    old = fingerprinted("http://a.test/old", index_html("a"))
    conn = db.connect(tmp_path)
    with conn:
        conn.execute("ALTER TABLE pages DROP COLUMN minhash")  # as an older Trawler made it
        conn.execute("INSERT INTO pages (url, status, text_hash, simhash) VALUES (?, 200, ?, ?)",
                     (old.url, old.text_hash, old.simhash))  # fmt: skip
    conn.close()
    conn = db.connect(tmp_path)  # what a resumed crawl does first
    rows = list(db.SqliteStore(conn).content_fingerprints())
    conn.close()
    assert rows == [(old.url, old.text_hash, old.simhash, None)]
    dedup = ContentDedup()
    dedup.load(rows)
    near = edited_copy("http://a.test/near", "a")
    copy = fingerprinted("http://a.test/copy", index_html("a"))
    assert checked(dedup, [near, copy]) == {near.url: None, copy.url: old.url}


def _brute_force_verdicts(pages: list[PageRecord], max_bits: int = 3) -> list[str | None]:
    """ContentDedup's rule by scanning every stored page: the same text, else the
    closest candidate (then the first stored) whose sketch agrees."""
    exact: dict[str | None, str] = {}
    stored: list[tuple[int, str, bytes]] = []  # (fingerprint, url, sketch) of originals
    verdicts: list[str | None] = []
    for page in pages:
        assert page.simhash is not None and page.minhash is not None
        fingerprint = int(page.simhash, 16)
        original = exact.get(page.text_hash)
        if original is None:
            fingerprints = [f for f, _, _ in stored]
            for position in _brute_force_candidates(fingerprints, fingerprint, max_bits, 10):
                if similarity(stored[position][2], page.minhash) >= NEAR_DUPLICATE_JACCARD:
                    original = stored[position][1]
                    break
        verdicts.append(original)
        if original is None:
            exact[page.text_hash] = page.url
            stored.append((fingerprint, page.url, page.minhash))
    return verdicts


def _two_originals_near_a_third(rng: random.Random, groups: int) -> list[PageRecord]:
    """Texts A and B, each 5 words from C (J ~0.93 with C), 10 from each other (J
    ~0.86: both originals), then C itself: two candidates confirm, and which one C
    is a duplicate of depends on their order."""
    vocabulary = [f"w{i}" for i in range(3000)]
    pages = []
    for group in range(groups):
        middle = [rng.choice(vocabulary) for _ in range(400)]
        sites = rng.sample(range(400), 10)
        for name, edits in (("a", sites[:5]), ("b", sites[5:]), ("c", [])):
            text = [f"edit{site}" if site in edits else word for site, word in enumerate(middle)]
            pages.append(fingerprinted(f"http://t.test/{group}/{name}", f"<p>{' '.join(text)}</p>"))
    return pages


def test_verdicts_on_the_benchmark_web_equal_a_brute_force_scan() -> None:
    """The crawl benchmark's pages (one template, a 70-word vocabulary: clustered
    SimHashes), and copies of some with one word changed or none, in crawl order;
    then pages with two confirmed candidates."""
    site, rng = Site(SiteSpec(hosts=60, pages=25)), random.Random(11)
    pages = []
    for n in range(25):
        for i in range(site.spec.hosts):
            response = site.page(i, f"/p/{n}.html")
            assert response is not None
            html = response.body.decode()
            pages.append(fingerprinted(f"{site.base(i)}/p/{n}.html", html))
            if rng.random() < 0.2:  # a mirror: the same page, or one word changed
                word = rng.choice(html.split("<p>", 1)[1].split()[:6]).strip(".")
                copy = html.replace(word, "zqxedited", 1) if rng.random() < 0.7 else html
                pages.append(fingerprinted(f"http://mirror.test/{i}/{n}/{len(pages)}", copy))
    pages += _two_originals_near_a_third(random.Random(12), 30)
    expected = _brute_force_verdicts(pages)
    assert list(checked(ContentDedup(), pages).values()) == expected
    text_of = {page.url: page.text_hash for page in pages}
    flagged = [(p.text_hash, text_of[v]) for p, v in zip(pages, expected, strict=True) if v]
    assert sum(mine == theirs for mine, theirs in flagged) > 30  # exact copies
    assert sum(mine != theirs for mine, theirs in flagged) > 100  # near-duplicates
