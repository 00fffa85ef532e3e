"""The link graph end to end, on both backends: the edges `trawler export --graph`
writes are the links the served pages really have (the generated web's own list of
them, not trawler's parser), each once per page, the same in JSON lines, CSV and
Parquet; and the URL view of the API counts a URL's inbound links from them."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from tests.e2e.api_server import start_serve
from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.conftest import Served, run_trawler
from tests.e2e.scripted import start_scripted
from tests.e2e.serve_dist import start_dist_serve

HTML = {"Content-Type": "text/html"}
# One page repeating a link (same target, text and rel: one edge), the same target
# under another text (another edge), a nofollow link, an <area>, a link out of scope,
# a link to a URL that does not normalise, and links that are no http(s) URL at all.
HOME = """<html><body>
<a href="/a">Alpha</a> <a href="/a">Alpha</a> <a href="./a#x"> Alpha </a>
<a href="/a">Alpha page</a>
<a href="/b" rel="NoFollow  External">B</a>
<map name="m"><area href="/c" alt="Map C"></map>
<a href="http://out-of-scope.invalid/x">Away</a>
<a href="http://a..b/">Broken</a>
<a href="mailto:x@example.invalid">Mail</a> <a href="#top">Top</a>
</body></html>"""
SCRIPT = {"0": {
    "/robots.txt": {"body": "User-agent: *\nDisallow:\n", "headers": {"Content-Type": "text/plain"}},  # noqa: E501
    "/": {"body": HOME, "headers": HTML},
    "/a": {"body": '<a href="/">Home</a> <a href="/c">C</a>', "headers": HTML},
    "/c": {"body": '<a href="/a">Alpha</a>', "headers": HTML},
}}  # fmt: skip


def graph_rows(crawled: Crawled, fmt: str = "jsonl") -> list[dict]:
    text = crawled.export_text("--graph", "--format", fmt)
    if fmt == "csv":
        # CSV has no null: an empty field is an absent value.
        rows = list(csv.DictReader(io.StringIO(text)))
        return [{k: (v or None) for k, v in row.items()} for row in rows]
    return [json.loads(line) for line in text.splitlines()]


def parquet_rows(crawled: Crawled, path: Path) -> list[dict]:
    out = run_trawler("export", *crawled.source, "--graph", "--format", "parquet", "-o", str(path))
    assert out.returncode == 0, out.stderr
    return pq.read_table(path).to_pylist()


def expected_edges(served: Served, pages: list[str]) -> Counter:
    """The served pages' links as the generated web lists them: an href that is empty
    or a fragment only is the page itself, not a link; one of another scheme none."""
    site, edges = served.site, set()
    for url in pages:
        i, path = site._split(url)
        assert i is not None
        for link in site.links(i, path):
            if link.target is None or not link.href or link.href.startswith("#"):
                continue
            rel = " ".join(link.rel.lower().split()) or None
            edges.add((url, link.target, link.href, rel, "nofollow" if link.nofollow else None))
    return Counter(edges)


def test_exported_edges_are_the_served_links(
    crawl_backend: CrawlBackend, testsite: Served, tmp_path: Path
) -> None:
    crawled = crawl_backend.crawl(
        testsite.seeds, "--no-sitemaps", "--scope", "any", "--delay", "0.02"
    )
    assert crawled.returncode == 0, crawled.stderr
    pages = [r["url"] for r in crawled.export() if r["content_type"] == "text/html"]
    rows = graph_rows(crawled)
    got = Counter((r["from_url"], r["to_url"], r["anchor"], r["rel"], r["reason"]) for r in rows)
    assert got == expected_edges(testsite, pages)
    assert max(got.values()) == 1
    assert graph_rows(crawled, "csv") == rows
    assert parquet_rows(crawled, tmp_path / "graph.parquet") == rows


def test_a_link_once_per_page_whatever_the_crawl_made_of_it(
    crawl_backend: CrawlBackend, tmp_path: Path
) -> None:
    server = start_scripted(tmp_path, SCRIPT)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--no-sitemaps", "--delay", "0")
    finally:
        server.stop()
    assert crawled.returncode == 0, crawled.stderr
    base = server.bases[0]
    rows = [(r["from_url"], r["to_url"], r["anchor"], r["rel"], r["reason"])
            for r in graph_rows(crawled)]  # fmt: skip
    home = [row[1:] for row in rows if row[0] == base + "/"]
    assert home == [
        (base + "/a", "Alpha", None, None),
        (base + "/a", "Alpha page", None, None),
        (base + "/b", "B", "nofollow external", "nofollow"),
        (base + "/c", "Map C", None, None),
        ("http://out-of-scope.invalid/x", "Away", None, "out_of_scope"),
        ("http://a..b/", "Broken", None, "bad_url"),
    ]
    assert sorted(row for row in rows if row[0] != base + "/") == [
        (base + "/a", base + "/", "Home", None, None),
        (base + "/a", base + "/c", "C", None, None),
        (base + "/c", base + "/a", "Alpha", None, None),
    ]
    reports = inbound(crawled, [base + "/a", base + "/b", base + "/nowhere"], tmp_path)
    assert reports == [
        (2, [base + "/", base + "/c"]),
        (1, [base + "/"]),  # never fetched: nofollow
        (0, []),
    ]


def inbound(crawled: Crawled, urls: list[str], tmp: Path) -> list[tuple[int, list[str]]]:
    """The API's URL view of each of ``urls`` (a `trawler serve` process over the
    crawl's store): its inbound links, and the pages they are on."""
    if crawled.source[0] == "--data":
        served = start_serve(Path(crawled.source[1]), tmp / "serve.log")
        job = {}
    else:
        postgres, job_id, redis = (crawled.stats_source[i] for i in (1, 3, 5))
        served = start_dist_serve(tmp, redis, postgres)
        job = {"job": job_id}
    try:
        with served.client() as client:
            answers = [client.get("/api/v1/urls", params={"url": url, **job}) for url in urls]
    finally:
        served.stop()
    assert all(answer.status_code == 200 for answer in answers), answers[0].text
    return [(a.json()["inbound_links"], a.json()["linked_from"]) for a in answers]


def test_bad_export_options_are_one_line_and_exit_2(tmp_path: Path) -> None:
    parquet = run_trawler("export", "--data", str(tmp_path), "--graph", "--format", "parquet")
    assert parquet.returncode == 2 and "give --output FILE" in parquet.stderr
    assert len(parquet.stderr.strip().splitlines()) == 1
    for extra in (["--format", "wacz", "-o", "x.wacz"], ["--attempts"]):
        mixed = run_trawler("export", "--data", str(tmp_path), "--graph", *extra)
        assert mixed.returncode == 2 and "--graph exports the link graph" in mixed.stderr
    pg = run_trawler("export", "--graph", "--postgres", "postgresql://127.0.0.1:1/x")
    assert pg.returncode == 2 and pg.stderr.strip() == "trawler: error: --postgres needs --job"
