"""CPU time per page of the embedded writer thread's commits, part by part.

A crawl of the benchmark's web (``trawler.sitegen`` with the spec that
``make_nginx_site.py`` serves) is played through the real ``EmbeddedBackend``
on a real SQLite file: the seeds are committed, then each batch leases its
URLs from the frontier's disk queues (one URL of each host in turn, as a
polite crawl meets them), and its commit holds, as the engine's do, a
robots.txt download per new host, the pages with their fetch attempt and
edges, the new links found on them (into the frontier's ``urls`` table, and a
provenance row each, as discovery.py makes them), the URLs done,
counters, the search index, the WARC records and the content dedup. After
each commit its new URLs are enqueued and its leases acknowledged, as
``EmbeddedBackend.commit`` does. Pages are parsed before any clock runs
(once, kept for the repeats).

Times are ``time.thread_time`` of the thread that commits (``_commit`` runs
on it, as on the writer thread), per page (robots.txt downloads included in
the count), the median of ``--repeat`` runs; ``wall_us`` is the commit's wall
time (fsyncs included) and ``process_us`` the CPU time of the whole process
(the WAL checkpoint thread's included). ``parts`` splits the writer's CPU
time by the functions the commit calls; ``commit`` is the rest: mostly
SQLite's COMMIT and the transaction's own statements.

    .venv/bin/python bench/bench_commit.py --hosts 200 --repeat 3

``--code DIR`` runs it on the code of another checkout (e.g. ``git archive main``
unpacked in a directory) to compare before and after, back to back; the editable
install's import hook would win over ``PYTHONPATH``.
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
from pathlib import Path
from typing import Any


def _use_code(argv: list[str]) -> None:
    """``--code DIR``: import trawler from DIR, not from the editable install."""
    if "--code" in argv:
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, argv[argv.index("--code") + 1])


_use_code(sys.argv)
sys.path.insert(0, str(Path(__file__).parent))

from bench_warc import fetched  # noqa: E402

import trawler  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402
from trawler.dedup import url_fingerprint  # noqa: E402
from trawler.outcome import Outcome, page_outcome, robots_record  # noqa: E402
from trawler.records import CrawlRequest, FetchResult  # noqa: E402
from trawler.sitegen import Site, SiteSpec  # noqa: E402
from trawler.store.base import DONE, CommitBatch, UrlOutcome  # noqa: E402
from trawler.store.embedded import EmbeddedBackend  # noqa: E402
from trawler.urls import host_key  # noqa: E402

# (module, owner, attribute) of the functions a commit's CPU time is split by.
PARTS = {
    "archive": ("trawler.store.embedded", None, "archive_batch"),
    "warc": ("trawler.store.warc", "WarcWriter", "write"),
    "dedup": ("trawler.dedup", "ContentDedup", "check"),
    "insert_pages": ("trawler.store.sqlite", "SqliteStore", "insert_pages"),
    "insert_attempts": ("trawler.store.sqlite", "SqliteStore", "insert_attempts"),
    "persist_new": ("trawler.frontier.sqlite", "SqliteFrontier", "persist_new"),
    "persist_done": ("trawler.frontier.sqlite", "SqliteFrontier", "persist_done"),
    "persist_hosts": ("trawler.frontier.sqlite", "SqliteFrontier", "persist_hosts"),
    "fts": ("trawler.store.search", None, "index_pages_after"),
    "counters": ("trawler.store.sqlite", "SqliteStore", "add_counters"),
    "insert_edges": ("trawler.store.sqlite_graph", None, "insert_edges"),  # the link graph
    "provenance": ("trawler.store.sqlite_provenance", None, "write"),
}


class PartTimer:
    """Wraps the functions of PARTS to add up their thread CPU time (restored on exit)."""

    def __init__(self) -> None:
        self.cpu_s: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self._undo: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> PartTimer:
        for name, (module_name, owner, attribute) in PARTS.items():
            target: Any = sys.modules.get(module_name)  # None: not in the code measured
            if owner is not None:
                target = getattr(target, owner)
            if target is not None and hasattr(target, attribute):
                original = getattr(target, attribute)
                setattr(target, attribute, self._timed(name, original))
                self._undo.append((target, attribute, original))
        return self

    def __exit__(self, *exc: object) -> None:
        for target, attribute, original in reversed(self._undo):
            setattr(target, attribute, original)

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu_s[name] += time.thread_time() - started

        return timed


class Pages:
    """The web's answers, parsed once: (fetch result, outcome) per URL."""

    def __init__(self, site: Site) -> None:
        self.site, self.config = site, CrawlConfig()
        self.paths = [set(site.paths(i)) - {"/robots.txt", "/sitemap.xml"}
                      for i in range(site.spec.hosts)]  # fmt: skip
        self._parsed: dict[str, tuple[FetchResult, Outcome]] = {}
        self.edges: dict[str, list] = {}  # the link graph's, where the code measured has one

    def in_web(self, url: str) -> bool:
        rest = url.split("://", 1)[-1]
        netloc, slash, path = rest.partition("/")
        i = self.site.host_index(netloc)
        return i is not None and slash + path in self.paths[i]

    def answer(self, request: CrawlRequest, n: int) -> tuple[FetchResult, Outcome]:
        if request.url not in self._parsed:
            i = self.site.host_index(request.url.split("/", 3)[2])
            assert i is not None
            path = "/" + request.url.split("/", 3)[3]
            response = self.site.page(i, path)
            assert response is not None
            result = fetched(request.url, response.status, response.content_type,
                             response.body, n)  # fmt: skip
            outcome = page_outcome(request, result, self.config, "x")
            self._parsed[request.url] = (result, outcome)
            self.edges[request.url] = _edges(outcome, request.depth + 1)
        return self._parsed[request.url]

    def robots(self, host: str, n: int) -> tuple[FetchResult, Any]:
        base = f"http://{host}"
        i = self.site.host_index(host)
        assert i is not None
        response = self.site.page(i, "/robots.txt")
        assert response is not None
        result = fetched(base + "/robots.txt", 200, response.content_type, response.body, n)
        return result, robots_record(result, host_key(base))


def _edges(outcome: Outcome, depth: int) -> list:
    """The page's edges (graph.py), as a parser process makes them; none before the graph."""
    try:
        from trawler.graph import page_edges
    except ImportError:
        return []
    from trawler.linkfilter import LinkFilter
    from trawler.scope import Scope, TrapRules
    from trawler.urls import Normaliser

    links = LinkFilter(Normaliser(()), Scope.from_hosts("any", []), TrapRules(), None,
                       lambda _url: None)  # fmt: skip
    return page_edges(outcome.found, links, depth, outcome.nofollow)


def request_for(url: str, depth: int, parent: str | None) -> CrawlRequest:
    return CrawlRequest(url, depth, parent, host_key(url), url_fingerprint(url))


class Crawl:
    """One run: a fresh data directory, the seeds, then a batch after another."""

    def __init__(self, pages: Pages, directory: Path, batch_size: int) -> None:
        self.pages, self.batch_size = pages, batch_size
        self.backend = EmbeddedBackend(directory)
        self.frontier = asyncio.run(self.backend.open(CrawlConfig()))
        self.seen: set[str] = set()
        self.robots_done: set[str] = set()
        self.hosts: list[str] = []
        self.n = 0
        self.counts = {"pages": 0, "cpu_s": 0.0, "wall_s": 0.0, "process_s": 0.0}

    def run(self) -> dict[str, float]:
        site = self.pages.site
        seeds = [request_for(site.base(i) + "/", 0, None) for i in range(site.spec.hosts)]
        self.seen.update(r.url for r in seeds)
        self.hosts = [r.host for r in seeds]
        self.commit(CommitBatch(new_requests=seeds), timed=False)
        with PartTimer() as parts:
            while (batch := self.next_batch()) is not None:
                self.commit(batch, timed=True)
        self.backend._close()
        self.backend._writer.shutdown()
        return {**self.counts, **parts.cpu_s}

    def next_batch(self) -> CommitBatch | None:
        """Up to batch_size URLs, one of each host with queued URLs in turn."""
        queues, batch = self.frontier._queues, CommitBatch()
        while len(batch.outcomes) < self.batch_size:
            hosts = [host for host in self.hosts if queues.has_queued(host)]
            if not hosts:
                break
            for host in hosts[: self.batch_size - len(batch.outcomes)]:
                request = queues.pop(host)
                if request is not None:
                    self.fetch(batch, request)
        return batch if batch.outcomes else None

    def fetch(self, batch: CommitBatch, request: CrawlRequest) -> None:
        self.n += 1
        if request.host not in self.robots_done:
            self.robots_done.add(request.host)
            batch.add_robots(*self.pages.robots(request.host, self.n))
        result, parsed = self.pages.answer(request, self.n)
        found, rows = [], []
        for link in parsed.links:
            if link.url not in self.seen and self.pages.in_web(link.url):
                self.seen.add(link.url)
                found.append(request_for(link.url, request.depth + 1, request.url))
                rows.append((link.url, request.url, "link", link.anchor, None, None))
        attempt = (request.url, 1, result.started_at, result.duration_s, result.status, None,
                   DONE)  # fmt: skip
        page = copy.copy(parsed.page)  # a commit sets its WARC place and duplicate mark
        outcome = UrlOutcome(request, DONE, [attempt], result, page, found)
        if hasattr(outcome, "edges"):
            outcome.edges = self.pages.edges[request.url]
        if hasattr(outcome, "provenance"):  # a row per new URL, as discovery.py makes them
            outcome.provenance = rows
        batch.add(outcome)
        for name, value in (("fetched", 1), ("links.found", len(parsed.links))):
            batch.counters[name] = batch.counters.get(name, 0) + value

    def commit(self, batch: CommitBatch, timed: bool) -> None:
        """As ``EmbeddedBackend.commit``, on this thread: the clocks run around ``_commit``."""
        mark = self.frontier.restart_mark()
        wall, cpu, process = time.perf_counter(), time.thread_time(), time.process_time()
        self.backend._commit(batch, mark)
        if timed:
            self.counts["cpu_s"] += time.thread_time() - cpu
            self.counts["wall_s"] += time.perf_counter() - wall
            self.counts["process_s"] += time.process_time() - process
            self.counts["pages"] += batch.pages + len(batch.robots)
        self.frontier.enqueue(batch.all_new_requests())
        self.frontier.ack(batch.acked)


def measure(pages: Pages, batch_size: int, repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat + 1):  # the first parses the pages: not counted
        directory = Path(tempfile.mkdtemp(prefix="bench-commit-"))
        try:
            runs.append(Crawl(pages, directory, batch_size).run())
        finally:
            shutil.rmtree(directory)

    def us(key: str) -> float:
        return round(statistics.median(r[key] / r["pages"] for r in runs[1:]) * 1e6, 1)

    parts = {name: us(name) for name in PARTS}
    parts["archive"] = round(parts["archive"] - parts["warc"] - parts["dedup"], 1)  # the rest
    parts["commit"] = round(us("cpu_s") - sum(parts.values()), 1)
    return {
        "pages": runs[1]["pages"], "cpu_us": us("cpu_s"), "wall_us": us("wall_s"),
        "process_us": us("process_s"), "parts": parts,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--pages", type=int, default=39, help="/p/N.html pages per host")
    parser.add_argument("--batch", type=int, default=375, help="URLs per commit (0.25 s)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", type=Path, help="a checkout to import trawler from")
    args = parser.parse_args()
    pages = Pages(Site(SiteSpec(hosts=args.hosts, pages=args.pages)))
    report = {"code": str(Path(trawler.__file__).parent.parent), "batch": args.batch}
    print(report | measure(pages, args.batch, args.repeat), flush=True)


if __name__ == "__main__":
    main()
