"""CPU time per page of the embedded writer thread: WARC records alone, and the whole commit.

The pages are the crawl benchmark's (``trawler.sitegen`` with the spec that
``make_nginx_site.py`` serves), each with nginx's response headers and the
request headers the fetcher sends, a robots.txt download per host, cut into
batches of ``--batch`` URLs (a commit every 0.25 s at ~1,000 pages/s). Pages
are parsed once, before any clock runs.

- ``warc``: ``archive_batch`` into a fresh WARC directory (records built,
  deflated, written, fsynced), content dedup left out;
- ``commit``: ``EmbeddedBackend._commit`` on a fresh data directory (WARC,
  page/attempt/robots rows, search index, frontier rows), its content-dedup
  time reported apart (``dedup_us``: another stage's cost) and taken out of
  ``commit_us``. Nothing is leased from the frontier here, so its persist_done
  looks each URL's row up (~10 µs a page) where a crawl's leases skip that.

CPU time is ``time.thread_time`` of the thread that commits, per page (robots.txt
downloads included in the count); the median of ``--repeat`` runs. WARC bytes
per page are the files' total size over the same count.

    .venv/bin/python bench/bench_warc.py --hosts 100 --repeat 3

Run it against another checkout's code with ``PYTHONPATH=<checkout>`` to compare
before and after, back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path

import trawler
from trawler.config import CrawlConfig
from trawler.dedup import ContentDedup, url_fingerprint
from trawler.outcome import page_outcome, robots_record
from trawler.records import CrawlRequest, FetchResult, PageRecord
from trawler.sitegen import Site, SiteSpec
from trawler.store.base import DONE, CommitBatch, UrlOutcome, archive_batch
from trawler.store.embedded import EmbeddedBackend
from trawler.store.warc import WarcWriter
from trawler.urls import host_key

REQUEST_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
START = 1_764_000_000.0  # a fixed clock: the same dates every run


def nginx_headers(body: bytes, content_type: str, n: int) -> list[tuple[str, str]]:
    """What nginx 1.2x sends for a static file (server_tokens off, sendfile on)."""
    modified = formatdate(START - 86_400 - n, usegmt=True)
    return [
        ("Server", "nginx"),
        ("Date", formatdate(START + n / 1000, usegmt=True)),
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Last-Modified", modified),
        ("Connection", "keep-alive"),
        ("ETag", f'"{int(START) - 86_400 - n:x}-{len(body):x}"'),
        ("Accept-Ranges", "bytes"),
    ]


def fetched(url: str, status: int, content_type: str, body: bytes, n: int) -> FetchResult:
    netloc = url.split("/", 3)[2]
    return FetchResult(
        url=url, final_url=url, status=status,
        headers=nginx_headers(body, content_type, n),
        content_type=content_type.split(";")[0], charset="utf-8", body=body, raw_body=body,
        request_headers=[
            ("Host", netloc), ("User-Agent", CrawlConfig().user_agent),
            ("Accept", REQUEST_ACCEPT), ("Accept-Encoding", "gzip, deflate, br"),
        ],
        ip_address=netloc.split(":")[0], started_at=START + n / 1000, duration_s=0.002,
    )  # fmt: skip


def crawl_order(site: Site) -> list[tuple[int, str]]:
    """(host, path) in the order a polite crawl meets them: one URL of each host in turn."""
    paths = [[p for p in site.paths(i) if p not in ("/robots.txt", "/sitemap.xml")]
             for i in range(site.spec.hosts)]  # fmt: skip
    longest = max(len(p) for p in paths)
    return [(i, p[k]) for k in range(longest) for i, p in enumerate(paths) if k < len(p)]


def build_batches(site: Site, batch_size: int) -> list[CommitBatch]:
    """The crawl's commits: robots.txt first for each host, then its pages."""
    config, token = CrawlConfig(), "trawler"
    seen: set[str] = set()
    batches, batch, robots_done = [], CommitBatch(), set()
    for n, (i, path) in enumerate(crawl_order(site)):
        base = site.base(i)
        if i not in robots_done:
            robots_done.add(i)
            answer = site.page(i, "/robots.txt")
            assert answer is not None
            result = fetched(base + "/robots.txt", 200, answer.content_type, answer.body, n)
            batch.add_robots(result, robots_record(result, host_key(base)))
        answer = site.page(i, path)
        assert answer is not None
        url = base + path
        request = CrawlRequest(url, 1, base + "/", host_key(url), url_fingerprint(url))
        result = fetched(url, answer.status, answer.content_type, answer.body, n)
        outcome = page_outcome(request, result, config, token)
        found = [link.url for link in outcome.links if link.url not in seen]
        seen.update(found)
        attempt = (url, 1, result.started_at, result.duration_s, result.status, None, "done")
        batch.add(UrlOutcome(request, DONE, [attempt], result, outcome.page, [
            CrawlRequest(u, 2, url, host_key(u), url_fingerprint(u)) for u in found
        ]))  # fmt: skip
        if len(batch.outcomes) >= batch_size:
            batches.append(batch)
            batch = CommitBatch()
    return [*batches, batch] if batch.outcomes else batches


class TimedDedup:
    """The real content dedup, its thread CPU time kept apart (another stage's cost)."""

    def __init__(self, inner: ContentDedup | None) -> None:
        self.inner, self.cpu_s = inner, 0.0

    def check(self, page: PageRecord) -> None:
        started = time.thread_time()
        if self.inner is not None:
            self.inner.check(page)
        self.cpu_s += time.thread_time() - started

    def load(self, rows: object) -> None:
        assert self.inner is not None
        self.inner.load(rows)  # type: ignore[arg-type]


def pages_in(batches: list[CommitBatch]) -> int:
    return sum(len(b.robots) + b.pages for b in batches)


def warc_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*.warc.gz*"))


def run_warc(batches: list[CommitBatch], directory: Path) -> dict[str, float]:
    dedup = TimedDedup(None)
    with WarcWriter(directory / "warc") as writer:
        started = time.thread_time()
        for batch in batches:
            archive_batch(batch, writer, dedup)  # type: ignore[arg-type]
        cpu_s = time.thread_time() - started - dedup.cpu_s
    return {"cpu_s": cpu_s, "bytes": warc_bytes(directory)}


def run_commit(batches: list[CommitBatch], directory: Path) -> dict[str, float]:
    backend = EmbeddedBackend(directory)
    frontier = asyncio.run(backend.open(CrawlConfig()))
    dedup = TimedDedup(backend.dedup)
    backend.dedup = dedup  # type: ignore[assignment]
    started = time.thread_time()
    for batch in batches:
        backend._commit(batch, frontier.restart_mark())
    cpu_s = time.thread_time() - started
    size = warc_bytes(directory)
    backend._close()
    backend._writer.shutdown()
    return {"cpu_s": cpu_s - dedup.cpu_s, "dedup_s": dedup.cpu_s, "bytes": size}


def median_run(
    run: Callable[[list[CommitBatch], Path], dict[str, float]],
    batches: list[CommitBatch],
    repeat: int,
) -> dict[str, float]:
    pages, runs = pages_in(batches), []
    for _ in range(repeat):
        fresh = copy.deepcopy(batches)  # a commit sets WARC places and duplicate marks
        directory = Path(tempfile.mkdtemp(prefix="bench-warc-"))
        try:
            runs.append(run(fresh, directory))
        finally:
            shutil.rmtree(directory)
    scale = {"bytes": 1.0}  # bytes per page; times in µs per page
    return {
        key: round(statistics.median(r[key] for r in runs) / pages * scale.get(key, 1e6), 1)
        for key in runs[0]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=39, help="/p/N.html pages per host")
    parser.add_argument("--batch", type=int, default=300, help="URLs per commit")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mode", choices=["warc", "commit", "both"], default="both")
    args = parser.parse_args()
    site = Site(SiteSpec(hosts=args.hosts, pages=args.pages))
    batches = build_batches(site, args.batch)
    report: dict[str, object] = {"code": str(Path(trawler.__file__).parent.parent),
                                 "pages": pages_in(batches)}  # fmt: skip
    if args.mode in ("warc", "both"):
        warc = median_run(run_warc, batches, args.repeat)
        report |= {"warc_us": warc["cpu_s"], "warc_bytes": warc["bytes"]}
    if args.mode in ("commit", "both"):
        commit = median_run(run_commit, batches, args.repeat)
        report |= {"commit_us": commit["cpu_s"], "dedup_us": commit["dedup_s"]}
    print(report, flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
