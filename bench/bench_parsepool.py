"""Parser-pool benchmark: what one page costs on its trip through the parser processes.

    .venv/bin/python bench/bench_parsepool.py [--hosts 40] [--rounds 3] [--rev main] [--profile]

The pages are the crawl benchmark's (trawler.sitegen, as bench/make_nginx_site.py
writes them for nginx): every HTML document of ``--hosts`` hosts × 39 pages, as
FetchResults with the headers nginx sends and CrawlRequests at their depth. All of
them go through ``AnalysisPool.analyse`` with one parser process, arriving at
1,200 pages/s (the crawl benchmark's steady state), each awaited by a task of its
own as the crawl loop does: batches are as big as in the crawl. Per page, median of ``--rounds``:

- ``main``: CPU of the crawl process (time.process_time: the event loop plus the
  pool's helper threads, if any), i.e. submitting a page and taking its Analysis back;
  "the tasks alone" is the part of it the benchmark's own tasks cost;
- ``parser``: CPU of the parser process over the same time (/proc/PID/stat), and the
  part of it spent inside ``analyse_batch`` (the pages analysed and turned into
  tuples; the process's own count): the rest is the pipe, pickling and waking up;
- ``inline``: CPU of ``analyse`` called directly (``--parse-processes 0``), for scale.

``--batch-wait S`` sets the pool's batch wait (analysis.BATCH_WAIT_S, 0.005): a
longer wait sends fewer, bigger batches, so the process wakes up less often.
``--profile`` lists the top costs inside the parser (cProfile around the function
the parser process runs on a batch, in this process); ``--rev REV`` runs the same
measurement on that git revision's tree (extracted to a temporary directory) first.
``--bursts`` analyses the pages inline in bursts with sleeps between (as the parser
process sees them at 1,200 pages/s: a batch of ~7 pages every 5 ms), against a tight
loop: CPU per page (thread_time) of the same code, in the same process, cold or warm.
``--memo`` replays the links of ``--hosts`` hosts in crawl order (each host's pages a
second apart, all hosts at once) through the link filter's memo and prints the share
of links it answers per memo size (linkfilter.py; try ``--hosts 2000``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from trawler import analysis  # noqa: E402
from trawler.analysis import AnalysisPool, analyse  # noqa: E402
from trawler.config import CrawlConfig  # noqa: E402
from trawler.dedup import url_fingerprint  # noqa: E402
from trawler.parsers import ParserProcesses  # noqa: E402
from trawler.records import CrawlRequest, FetchResult  # noqa: E402
from trawler.sitegen import Site, SiteSpec  # noqa: E402
from trawler.urls import host_key  # noqa: E402

Page = tuple[CrawlRequest, FetchResult]
RATE = 1_200  # pages a second: the crawl benchmark's steady state
# In the parser process only: CPU seconds spent inside analyse_batch so far.
_IN_BATCH_S = [0.0]


def benchmark_pages(hosts: int, pages: int = 39) -> tuple[list[Page], list[str]]:
    """Every HTML document of the generated web, as the fetcher hands it over."""
    site = Site(SiteSpec(hosts=hosts, pages=pages, port=8800))
    depths = site.reachable(site.seeds())
    out: list[Page] = []
    for url, depth in depths.items():
        i = site.host_index(url.split("/")[2])
        assert i is not None
        target = "/" + url.split("/", 3)[3]
        answer = site.page(i, target)
        if answer is None or not answer.content_type.startswith("text/html"):
            continue
        out.append((CrawlRequest(url, depth, None, host_key(url), url_fingerprint(url)),
                    _result(url, answer.body)))  # fmt: skip
    return out, sorted({host_key(url) for url in site.seeds()})


def _result(url: str, body: bytes) -> FetchResult:
    headers = [("Server", "nginx"), ("Date", "Wed, 25 Nov 2026 10:00:00 GMT"),
               ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body))),
               ("Last-Modified", "Wed, 25 Nov 2026 09:00:00 GMT"), ("Connection", "keep-alive"),
               ("ETag", '"6564a0b0-1f3a"'), ("Accept-Ranges", "bytes")]  # fmt: skip
    sent = [("Host", url.split("/")[2]), ("User-Agent", "Trawler/0.1"), ("Accept", "*/*"),
            ("Accept-Encoding", "gzip, deflate")]  # fmt: skip
    return FetchResult(url, url, 200, headers, "text/html", "utf-8", body, body,
                       request_headers=sent, ip_address="127.0.1.1", started_at=time.time(),
                       duration_s=0.002)  # fmt: skip


def _children_cpu_s() -> float:
    """CPU seconds of this process's live children (the parser processes)."""
    total = 0.0
    for pid in _children():
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children() -> list[int]:
    me = str(os.getpid())
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as file:
                    if file.read().rsplit(")", 1)[1].split()[1] == me:
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


async def _through_pool(pool: AnalysisPool | None, pages: list[Page]) -> None:
    """Pages arrive as the crawl fetches them, ``RATE`` a second, each awaited by its
    own task: batches are as big as in the crawl. ``pool`` None: the tasks alone."""
    loop = asyncio.get_running_loop()
    started, tasks = loop.time(), []

    async def one(page: Page) -> None:
        if pool is not None:
            await pool.analyse(*page)

    for k, page in enumerate(pages):
        due = started + k / RATE
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        tasks.append(asyncio.create_task(one(page)))
    await asyncio.gather(*tasks)


def _timed_batch(setup: tuple[str, str], items: list, news: object = None) -> list[tuple]:
    """``analyse_batch``, counting its CPU time (runs in the parser process).

    thread_time, not process_time: Linux adds a running thread's CPU to the
    process clock late (at the next tick or switch), so process_time deltas
    this short land in whatever runs next (the answer's write, here)."""
    started = time.thread_time()
    try:
        return analysis.analyse_batch(setup, items, news)  # type: ignore[arg-type]
    finally:
        _IN_BATCH_S[0] += time.thread_time() - started


def _batch_cpu_s() -> float:
    return _IN_BATCH_S[0]


@contextlib.contextmanager
def _batches_timed() -> Iterator[None]:
    """The pool sends its batches to ``_timed_batch`` instead of ``analyse_batch``."""
    real = analysis.analyse_batch
    analysis.analyse_batch = _timed_batch  # type: ignore[assignment]
    try:
        yield
    finally:
        analysis.analyse_batch = real  # type: ignore[assignment]


async def _round(pages: list[Page], hosts: list[str]) -> tuple[float, float, float, float]:
    """CPU seconds: the crawl process, the parser process, the part of it inside
    analyse_batch, the tasks alone (the floor)."""
    parsers = ParserProcesses(1)
    pool = AnalysisPool(CrawlConfig(), 1, parsers)
    pool.start(hosts)
    try:
        with _batches_timed():
            await _through_pool(pool, pages[:64])  # the process is up and warm: not timed
            batches = await parsers.submit(_batch_cpu_s)
            main, parser = time.process_time(), _children_cpu_s()
            await _through_pool(pool, pages)
            main, parser = time.process_time() - main, _children_cpu_s() - parser
            batches = await parsers.submit(_batch_cpu_s) - batches
    finally:
        pool.close()
        parsers.close()
    floor = time.process_time()
    await _through_pool(None, pages)
    return main, parser, batches, time.process_time() - floor


def _inline_s(pages: list[Page], hosts: list[str]) -> float:
    pool = AnalysisPool(CrawlConfig(), 0)
    pool.start(hosts)
    started = time.process_time()
    for request, result in pages:
        analyse(pool.analyser, request, result)
    return time.process_time() - started


def _in_bursts_us(pages: list[Page], hosts: list[str], burst: int, sleep_s: float) -> float:
    """CPU µs per page of ``analyse`` inline, ``burst`` pages then ``sleep_s`` asleep."""
    pool = AnalysisPool(CrawlConfig(), 0)
    pool.start(hosts)
    spent = 0.0
    for start in range(0, len(pages), burst):
        started = time.thread_time()
        for request, result in pages[start : start + burst]:
            analyse(pool.analyser, request, result)
        spent += time.thread_time() - started
        if sleep_s:
            time.sleep(sleep_s)
    return spent * 1e6 / len(pages)


def burst_costs(hosts: int, rounds: int) -> None:
    pages, seed_hosts = benchmark_pages(hosts)
    shapes = (("a tight loop", 7, 0.0), ("7 pages, then 5 ms asleep", 7, 0.005),
              ("28 pages, then 20 ms asleep", 28, 0.02))  # fmt: skip
    costs: dict[str, list[float]] = {name: [] for name, _, _ in shapes}
    for _ in range(rounds):  # interleaved: the machine's load hits every shape alike
        for name, burst, sleep_s in shapes:
            costs[name].append(_in_bursts_us(pages, seed_hosts, burst, sleep_s))
    print(f"{len(pages)} pages analysed inline; CPU µs per page, median of {rounds}")
    for name, values in costs.items():
        print(f"| {name} | {statistics.median(values):.1f} |")


def measure(hosts: int, rounds: int) -> dict[str, object]:
    pages, seed_hosts = benchmark_pages(hosts)
    mains, parsers, batches, floors, inlines = [], [], [], [], []
    for _ in range(rounds):
        main_s, parser_s, batch_s, floor_s = asyncio.run(_round(pages, seed_hosts))
        mains.append(main_s)
        parsers.append(parser_s)
        batches.append(batch_s)
        floors.append(floor_s)
        inlines.append(_inline_s(pages, seed_hosts))
    per_page_us = 1e6 / len(pages)
    return {
        "tree": str(Path(__file__).resolve().parent.parent),
        "pages": len(pages),
        "main_us": round(statistics.median(mains) * per_page_us, 1),
        "floor_us": round(statistics.median(floors) * per_page_us, 1),
        "parser_us": round(statistics.median(parsers) * per_page_us, 1),
        "batch_us": round(statistics.median(batches) * per_page_us, 1),
        "inline_us": round(statistics.median(inlines) * per_page_us, 1),
    }


def profile(hosts: int, top: int = 25) -> None:
    """cProfile of ``analyse`` on every page: the parser process's own work."""
    pages, seed_hosts = benchmark_pages(hosts)
    pool = AnalysisPool(CrawlConfig(), 0)
    pool.start(seed_hosts)
    profiler = cProfile.Profile()
    profiler.enable()
    for request, result in pages:
        analyse(pool.analyser, request, result)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def memo_hit_rates(
    hosts: int, sizes: tuple[int, ...] = (1 << 15, 1 << 16, 1 << 17, 1 << 20)
) -> None:
    """Share of links the link filter's memo answers, the pages in crawl order."""
    from collections import defaultdict

    from trawler.linkfilter import LinkFilter
    from trawler.parse import parse_html
    from trawler.scope import Scope, TrapRules
    from trawler.urls import Normaliser

    pages, _ = benchmark_pages(hosts)
    by_host: dict[str, list[list[str]]] = defaultdict(list)
    for request, result in pages:  # in depth order per host, as the crawl finds them
        by_host[request.host].append(
            [link.url for link in parse_html(result.body, result.url).links]
        )
    rounds = max(map(len, by_host.values()))
    order = [links[k] for k in range(rounds) for links in by_host.values() if k < len(links)]
    total = sum(map(len, order))
    for size in sizes:
        computed = 0
        normalise = Normaliser()

        def counting(url: str, normalise: Normaliser = normalise) -> str | None:
            nonlocal computed
            computed += 1
            return normalise(url)

        links = LinkFilter(counting, Scope("any", ()), TrapRules(), None, lambda _: None,  # type: ignore[arg-type]
                           memo_size=size)  # fmt: skip
        for page_links in order:
            for url in page_links:
                links.digest(url)
        print(f"memo of {size:,} link URLs: {1 - computed / total:.1%} of {total:,} links answered")


def run_at_revision(rev: str, args: list[str]) -> dict[str, object]:
    """This benchmark on ``rev``'s tree, extracted to a temporary directory."""
    top = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(top), "archive", rev], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        bench = Path(tmp) / "bench" / "bench_parsepool.py"
        bench.write_bytes(Path(__file__).read_bytes())  # the same measurement on both
        out = subprocess.run([sys.executable, str(bench), *args, "--json"], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
    return dict(json.loads(out.splitlines()[-1]), tree=rev)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=40, help="hosts of 39 pages each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rev", help="first run on this git revision's tree")
    parser.add_argument("--profile", action="store_true", help="cProfile the parser's work")
    parser.add_argument("--batch-wait", type=float, help="the pool's batch wait, seconds")
    parser.add_argument("--bursts", action="store_true", help="inline, in bursts and asleep")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--memo", action="store_true", help="the link memo's hit rates")
    args = parser.parse_args()
    if args.memo:
        memo_hit_rates(args.hosts)
        return
    if args.profile:
        profile(args.hosts)
        return
    if args.bursts:
        burst_costs(args.hosts, args.rounds)
        return
    if args.batch_wait is not None:
        analysis.BATCH_WAIT_S = args.batch_wait
    rows = []
    if args.rev:
        rows.append(run_at_revision(args.rev, ["--hosts", str(args.hosts),
                                               "--rounds", str(args.rounds)]))  # fmt: skip
    rows.append(measure(args.hosts, args.rounds))
    if args.json:
        print(json.dumps(rows[-1]))
        return
    print(f"{rows[-1]['pages']} pages, 1 parser process, {RATE} pages/s, "
          f"median of {args.rounds}; CPU µs per page")  # fmt: skip
    print("| tree | crawl process | of which the tasks alone | parser process "
          "| of which in analyse_batch | inline |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['tree']} | {row['main_us']} | {row['floor_us']} | {row['parser_us']} "
              f"| {row['batch_us']} | {row['inline_us']} |")  # fmt: skip


if __name__ == "__main__":
    # Run as the module, not as __main__: the functions sent to the parser process
    # (_timed_batch, _batch_cpu_s) must be importable there by name, and a parser
    # process does not run the parent's __main__ (parsers.py); as __main__ each
    # batch broke the process (ParserBroken).
    import bench_parsepool

    bench_parsepool.main()
