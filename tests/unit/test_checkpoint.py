"""Background WAL checkpoints (store/checkpoint.py): the writer's commits no longer
checkpoint, and the WAL stays bounded all the same."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from trawler.store.checkpoint import BACKSTOP_PAGES, Checkpointer

COMMITS = 30
ROWS = 100  # ~100 pages of WAL a commit


def _writer(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
    return conn


def _commit(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t VALUES (?)", [(os.urandom(4000),) for _ in range(ROWS)])
    conn.execute("COMMIT")


def _wal_bytes(path: Path) -> int:
    return Path(f"{path}-wal").stat().st_size


def _largest_wal(path: Path, checkpointer: Checkpointer | None) -> int:
    conn, largest = _writer(path), 0
    for _ in range(COMMITS):
        _commit(conn)
        largest = max(largest, _wal_bytes(path))
        if checkpointer is not None:
            done = checkpointer.checkpoints
            checkpointer.committed()
            deadline = time.monotonic() + 10  # bounded: a loaded machine is slow, not stuck
            while checkpointer.checkpoints == done and time.monotonic() < deadline:
                time.sleep(0.005)
    if checkpointer is not None:
        checkpointer.close()
    conn.close()
    return largest


def test_the_wal_stays_a_few_commits_long(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    _writer(path).close()
    checkpointer = Checkpointer(path)
    largest = _largest_wal(path, checkpointer)
    one_commit = ROWS * 4096
    assert checkpointer.checkpoints >= COMMITS
    assert largest < 5 * one_commit  # the WAL is reused once checkpointed
    with sqlite3.connect(path) as conn:  # and nothing was lost
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == COMMITS * ROWS


def test_without_it_the_commits_grow_the_wal_up_to_the_backstop(tmp_path: Path) -> None:
    """The twin that shows the measure above can fail: no checkpointer, and the
    writer's own checkpoint waits for BACKSTOP_PAGES."""
    path = tmp_path / "t.db"
    largest = _largest_wal(path, None)
    assert largest > 20 * ROWS * 4096
