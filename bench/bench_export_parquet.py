"""Peak memory of `trawler export` against crawl size: Parquet must stay flat.

Builds a data directory of ``--pages`` stored pages (through the real schema, each
with ``--text-bytes`` of page text drawn from a word list, so it compresses like
text), then runs `trawler export --format FMT -o FILE` in a child process for each
format and reports its wall time, peak RSS (the child's own rusage, os.wait4) and
output size. Run it for 10k and 100k pages: the Parquet row's peak RSS is the same.

    .venv/bin/python bench/bench_export_parquet.py --pages 10000 --data /tmp/bx10
    .venv/bin/python bench/bench_export_parquet.py --pages 100000 --data /tmp/bx100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from trawler.store.sqlite import connect
from trawler.store.sqlite_totals import recount

WORDS = [
    "harbour", "pilot", "keel", "anchor", "fleet", "herring", "chart", "wind", "tide", "mast",
    "sail", "rope", "deck", "hull", "bow", "stern", "cargo", "crew", "net", "trawl", "buoy",
]  # fmt: skip


def make_pages(data: Path, pages: int, text_bytes: int) -> None:
    """``pages`` page rows with text, written in batches (memory flat here too)."""
    rng = random.Random(1)
    conn = connect(data)
    sql = ("INSERT INTO pages (url, final_url, status, content_type, content_length, depth,"
           " title, description, text, links_count, fetched_at, fetch_duration_s, noindex,"
           " host, warc_file, warc_offset) VALUES (?, ?, 200, 'text/html', ?, 1, ?, ?, ?, 12,"
           " ?, 0.01, 0, 'bench.test', 'trawler-bench.warc.gz', ?)")  # fmt: skip
    start = time.time()
    for first in range(0, pages, 10_000):
        rows = []
        for i in range(first, min(pages, first + 10_000)):
            text = " ".join(rng.choices(WORDS, k=text_bytes // 5))[:text_bytes]
            url = f"http://bench.test/page/{i}"
            rows.append((url, url, 5_000 + i, f"Page {i}", "a description", text,
                         start + i / 1000, i * 5_000))  # fmt: skip
        with conn:
            conn.executemany(sql, rows)
    with conn:
        recount(conn)
    conn.close()


def export(data: Path, fmt: str, out: Path) -> dict:
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "trawler", "export", "--data", str(data), "--format", fmt,
         "-o", str(out)], stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _, status, usage = os.wait4(child.pid, 0)
    assert child.stderr is not None
    stderr = child.stderr.read()
    assert os.waitstatus_to_exitcode(status) == 0, stderr
    return {
        "format": fmt, "wall_s": round(time.monotonic() - started, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "output_mb": round(out.stat().st_size / 2**20, 1), "stderr": stderr.strip(),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--text-bytes", type=int, default=3_000)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--formats", default="parquet,jsonl")
    args = parser.parse_args()
    if not (args.data / "trawler.db").exists():
        make_pages(args.data, args.pages, args.text_bytes)
    for fmt in args.formats.split(","):
        result = export(args.data, fmt, args.data.parent / f"{args.data.name}.{fmt}")
        print(json.dumps({"pages": args.pages, **result}))


if __name__ == "__main__":
    main()
