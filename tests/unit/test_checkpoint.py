"""Background WAL checkpoints (store/checkpoint.py): the writer's commits no longer
checkpoint, and the WAL stays bounded all the same."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

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
    checkpointer = Checkpointer(path, every_s=0)
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


def _wait_for(checkpointer: Checkpointer, count: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while checkpointer.checkpoints < count and time.monotonic() < deadline:
        time.sleep(0.005)


@pytest.mark.parametrize("every_s", [3600.0, 0.0])
def test_commits_within_the_pause_share_the_next_checkpoint(tmp_path: Path, every_s: float) -> None:
    """After a checkpoint the thread waits ``every_s`` before the next: the commits
    meanwhile are copied into the database once (a page each dirtied, once). The
    twin without a pause checkpoints again at once, as it did after every commit."""
    path = tmp_path / "t.db"
    conn = _writer(path)
    checkpointer = Checkpointer(path, every_s=every_s)
    _commit(conn)
    checkpointer.committed()
    _wait_for(checkpointer, 1, 10)
    assert checkpointer.checkpoints == 1
    for _ in range(3):
        _commit(conn)
        checkpointer.committed()
    if every_s:
        time.sleep(0.5)  # room for a checkpoint that should not come
        assert checkpointer.checkpoints == 1
        assert _wal_bytes(path) >= 3 * ROWS * 4096  # the three wait, in the WAL
    else:
        _wait_for(checkpointer, 2, 10)
        assert checkpointer.checkpoints >= 2
    started = time.monotonic()
    checkpointer.close()  # ends the pause: no hour-long wait
    assert time.monotonic() - started < 5
    conn.close()
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT count(*) FROM t").fetchone()[0] == 4 * ROWS
