"""Rendered pages per second and peak memory of `trawler crawl --render`.

A site of script-only pages (tests/e2e/js_site.py ``--pages N --hosts H``: each
page an application shell whose links and text ``/gen.js`` writes) is served on
loopback, H sites on ports of their own, so that ``--render-concurrency`` pages
can render at once (one page of a host at a time: the host is held while its
page renders). The real `trawler crawl` runs over it with ``--render``; the
process tree's memory (crawl process, parser processes, Playwright's driver,
chromium's processes) is sampled every 0.2 s, as RSS summed over processes and
as PSS (shared pages counted once: chromium's processes share most of theirs).

    flock /tmp/cpu.lock .venv/bin/python bench/bench_render.py --pages 60 --hosts 4

Prints one JSON line: pages stored, rendered, seconds, pages/s, peak RSS and PSS,
and the CPU seconds of the crawl's whole process tree (the server's not included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tree(root: int) -> list[int]:
    """``root`` and every process descending from it."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            parents.setdefault(ppid, []).append(int(name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(parents.get(pid, []))
    return found


def memory(pids: list[int]) -> tuple[int, int]:
    """(RSS, PSS) in bytes, summed over ``pids``."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return rss, pss


class Peak:
    """The highest memory of a process tree, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.rss, self.pss = pid, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.2):
            rss, pss = memory(tree(self.pid))
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)


def serve(tmp: Path, pages: int, hosts: int) -> tuple[subprocess.Popen[str], list[str]]:
    cmd = [sys.executable, "-m", "tests.e2e.js_site", "--access-log", str(tmp / "access.jsonl"),
           "--pages", str(pages), "--hosts", str(hosts)]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    bases = []
    while (line := process.stdout.readline().strip()) != "ready":
        bases.append(line)
    return process, bases


def run(args: argparse.Namespace, tmp: Path) -> dict:
    server, bases = serve(tmp, args.pages, args.hosts)
    data = tmp / "data"
    seeds = [base + "gen/0" for base in bases]
    cmd = [sys.executable, "-m", "trawler", "crawl", *seeds, "--data", str(data), "--render",
           args.render, "--render-concurrency", str(args.concurrency), "--delay", str(args.delay),
           "--allow-private", "--no-sitemaps", "-q"]  # fmt: skip
    try:
        started = time.monotonic()
        crawl = subprocess.Popen(cmd, cwd=ROOT)
        peak = Peak(crawl.pid)
        crawl.wait()
        elapsed = time.monotonic() - started
        # Every descendant waited for (crawl, parsers, Playwright's driver, chromium).
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak.done.set()
        peak.thread.join()
    finally:
        server.terminate()
        server.wait(10)
    db = next(data.glob("jobs/*/trawler.db"))
    with sqlite3.connect(db) as conn:
        stored, rendered = conn.execute(
            "SELECT count(*), sum(rendered = 'yes') FROM pages WHERE kind = 'page'"
        ).fetchone()
    return {
        "render": args.render, "hosts": args.hosts, "pages_per_host": args.pages,
        "render_concurrency": args.concurrency, "pages": stored, "rendered": rendered,
        "seconds": round(elapsed, 2), "rendered_per_s": round((rendered or 0) / elapsed, 2),
        "peak_rss_mb": round(peak.rss / 2**20), "peak_pss_mb": round(peak.pss / 2**20),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "exit": crawl.returncode,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=60, help="pages per host")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=2, help="--render-concurrency")
    parser.add_argument("--render", default="always", choices=["auto", "always"])
    parser.add_argument("--delay", type=float, default=0.0, help="--delay (seconds)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        print(json.dumps(run(args, Path(tmp))))


if __name__ == "__main__":
    main()
