"""Where the embedded writer's time goes per new URL: insert against commit.

Run it on a data directory `bench_frontier.py --data DIR` left behind (a 10 M-URL
frontier is the case that matters); it appends new URLs to that database in
transactions of ``--batch`` rows, as the engine's commits do, and reports, per
row, the wall and CPU time of the inserts (``DiskQueues.persist_new``) and of the
COMMIT (WAL write, fsync and, unless taken off the commit path, the checkpoint).
``--pragma`` sets a PRAGMA on the writing connection first (repeatable), e.g.
``--pragma wal_autocheckpoint=0`` to see the commit without checkpoints.

    .venv/bin/python bench/bench_frontier.py --urls 10000000 --data /tmp/bf10
    .venv/bin/python bench/bench_writer.py --data /tmp/bf10 --rows 400000

The rows are added to that database for good: run it on a copy.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_frontier import batches  # noqa: E402

from trawler.frontier.disk_queue import DiskQueues  # noqa: E402
from trawler.store.sqlite import DB_NAME, connect  # noqa: E402


def measure(data: Path, batch: int, rows: int, pragmas: list[str]) -> dict:
    conn = connect(data)
    for pragma in pragmas:
        conn.execute(f"PRAGMA {pragma}")
    queues = DiskQueues()
    queues.open(conn)
    insert = commit = insert_cpu = commit_cpu = 0.0
    done = 0
    for requests in batches(rows, 10_000, batch, seed=int(time.time())):
        started, started_cpu = time.perf_counter(), time.process_time()
        conn.execute("BEGIN")
        queues.persist_new(conn, requests)
        inserted, inserted_cpu = time.perf_counter(), time.process_time()
        conn.commit()
        insert += inserted - started
        insert_cpu += inserted_cpu - started_cpu
        commit += time.perf_counter() - inserted
        commit_cpu += time.process_time() - inserted_cpu
        done += len(requests)
    wal = (data / f"{DB_NAME}-wal").stat().st_size
    conn.close()

    def us(seconds: float) -> float:
        return round(seconds / done * 1e6, 1)

    return {
        "rows": done, "batch": batch, "pragmas": pragmas,
        "insert_us": us(insert), "insert_cpu_us": us(insert_cpu),
        "commit_us": us(commit), "commit_cpu_us": us(commit_cpu),
        "wal_mb": wal >> 20,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=40_000, help="rows a commit")
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--pragma", action="append", default=[])
    args = parser.parse_args()
    print(measure(args.data, args.batch, args.rows, args.pragma))


if __name__ == "__main__":
    main()
