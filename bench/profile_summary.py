"""Bucket py-spy samples of a crawl into stages: where does the CPU time go?

    .venv/bin/python bench/profile_summary.py bench/work/crawl/profile.txt [--top 25]

Input: py-spy ``record --format raw --threads`` output, one collapsed stack a
line (``thread;frame;frame;... count``, root first); a frame reads
``function (path:line)`` with the path relative to sys.path
(``aiohttp/client.py``, ``trawler/parse.py``, ``asyncio/events.py``). Each sample is charged
to the innermost frame that matches a bucket rule below, so time spent in a
library called from a stage (urllib.parse under urls.py) goes to the stage
that called it, and aiohttp called from fetch.py goes to "aiohttp client".
Idle threads (the event loop waiting in epoll) are not sampled by py-spy
unless --idle was given, so percentages are of busy samples.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (bucket, pattern on a frame "function (path:line)"); the first rule that
# matches the innermost frame possible wins, so more specific rules go first.
RULES: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern))
    for name, pattern in [
        ("logging", r"\(logging/"),
        ("WARC write (gzip deflate, digests)", r"trawler/store/warc\.py|\(gzip\.py|\(isal/"),
        (
            "SQLite commit (pages, urls, counters)",
            r"trawler/store/sqlite\.py|persist_(new|done)|trawler/store/embedded\.py",
        ),
        (
            "HTML parse (selectolax) + page outcome",
            r"trawler/parse\.py|selectolax|trawler/outcome\.py",
        ),
        ("content dedup (SimHash, text hash)", r"trawler/simhash\.py"),
        ("robots.txt parse/match", r"trawler/robots(cache)?\.py"),
        ("link filter: normalise, scope, traps, dedup", r"trawler/(urls|linkfilter|dedup)\.py"),
        ("frontier + politeness (heap, seen set)", r"trawler/frontier/|trawler/politeness\.py"),
        ("fetch.py (headers, body decode, records)", r"trawler/fetch\.py|trawler/netguard\.py"),
        (
            "HTTP client (http1.py + httptools; aiohttp before issue 14)",
            r"trawler/(http1|connectors)\.py|\((httptools|aiohttp|aiosignal|yarl|multidict|propcache)/",
        ),
        ("engine (tasks, batch, robots gate)", r"trawler/engine\.py"),
        ("asyncio event loop + transports (syscalls)", r"\(asyncio/|\(selectors\.py"),
        ("thread pool plumbing", r"\(concurrent/futures/|\(threading\.py"),
    ]
]


def parse_line(line: str) -> tuple[list[str], int]:
    stack, _, count = line.rstrip("\n").rpartition(" ")
    return stack.split(";"), int(count)


def bucket_of(frames: list[str]) -> str:
    for frame in reversed(frames):  # innermost first
        for name, pattern in RULES:
            if pattern.search(frame):
                return name
    return "other (interpreter, startup, unmatched)"


def split_process(frames: list[str]) -> tuple[str, list[str]]:
    """py-spy --subprocesses puts the processes first, parent to child:
    'process 12:"python ... crawl ..."', then 'process 13:"python -c from
    multiprocessing.spawn import ..."' for a parser process (whose command line
    holds a ';', so it spans two frames). The thread's frame comes next.

    The crawl process keeps its thread names; every child (the parser
    processes, spawned by multiprocessing) is one column, "parser processes".
    """
    first_thread = next((i for i, f in enumerate(frames) if f.startswith("thread (")), 0)
    processes = [f for f in frames[:first_thread] if f.startswith("process ")]
    return ("parser processes" if len(processes) > 1 else ""), frames[first_thread:]


def thread_of(frames: list[str]) -> str:
    """py-spy --threads puts the thread first: 'thread (1234): MainThread'."""
    process, frames = split_process(frames)
    if process:
        return process
    name = frames[0].partition("): ")[2]
    if name == "MainThread":
        return "event loop (MainThread)"
    return "writer thread" if "writer" in name else name or "unknown"


def short(frame: str) -> str:
    """'f (/x/site-packages/aiohttp/client.py:12)' -> 'f (aiohttp/client.py)'."""
    match = re.match(r"(.*) \((.*?):\d+\)$", frame)
    if not match:
        return frame
    function, path = match.groups()
    for marker in ("site-packages/", "/trawler/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            path = ("trawler/" + path) if marker == "/trawler/" else path
            break
    return f"{function} ({path})"


def summarise(path: Path, top: int) -> str:
    buckets: Counter[tuple[str, str]] = Counter()
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        frames, count = parse_line(line)
        buckets[thread_of(frames), bucket_of(frames)] += count
        leaf[short(frames[-1])] += count
        for frame in {short(f) for f in split_process(frames)[1][1:]}:
            inclusive[frame] += count
    total = sum(buckets.values())
    threads: Counter[str] = Counter()
    by_bucket: Counter[str] = Counter()
    for (thread, name), n in buckets.items():
        threads[thread] += n
        by_bucket[name] += n
    names = [t for t, _ in threads.most_common()]
    out = [f"{total} samples; shares are of all samples\n"]
    out += ["| bucket | all threads | " + " | ".join(names) + " |"]
    out += ["|---|---:|" + "---:|" * len(names)]
    for name, n in by_bucket.most_common():
        cells = [_pct(buckets[t, name], total) for t in names]
        out.append(f"| {name} | {_pct(n, total)} | " + " | ".join(cells) + " |")
    cells = [_pct(threads[t], total) for t in names]
    out.append("| **total** | 100% | " + " | ".join(cells) + " |")
    out += ["", f"top {top} functions, inclusive (share of samples with it on the stack):"]
    out += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    out += ["", f"top {top} leaf functions (self time):"]
    out += [f"  {100 * n / total:5.1f}%  {name}" for name, n in leaf.most_common(top)]
    return "\n".join(out)


def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.1f}%"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    print(summarise(args.profile, args.top))


if __name__ == "__main__":
    main()
