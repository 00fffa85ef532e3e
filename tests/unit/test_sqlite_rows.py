"""Multi-row INSERTs (store/sqlite_rows.py) store what executemany stores, row by row."""

from __future__ import annotations

import sqlite3

import pytest

from trawler.store.sqlite_rows import insert_values

TABLE = "CREATE TABLE t (k TEXT UNIQUE, n INTEGER)"
UPSERT = " ON CONFLICT(k) DO UPDATE SET n = n + excluded.n"


def stored(rows: list[tuple[str, int]], multi: bool, tail: str = "") -> list[tuple]:
    conn = sqlite3.connect(":memory:")
    conn.execute(TABLE)
    if multi:
        changed = insert_values(conn, "INSERT INTO t VALUES", 2, [v for r in rows for v in r], tail)
    else:
        changed = conn.executemany("INSERT INTO t VALUES (?, ?)" + tail, rows).rowcount
    assert changed == len(rows)
    return conn.execute("SELECT rowid, k, n FROM t ORDER BY rowid").fetchall()


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 63, 64, 65, 73, 200])
def test_the_same_rows_and_rowids_as_one_at_a_time(count: int) -> None:
    rows = [(f"k{i}", i) for i in range(count)]
    assert stored(rows, multi=True) == stored(rows, multi=False)
    assert [row[0] for row in stored(rows, multi=True)] == list(range(1, count + 1))


def test_a_conflict_is_decided_row_by_row() -> None:
    """A key repeated within one statement meets the rows before it, as in executemany."""
    rows = [(f"k{i % 5}", i) for i in range(150)]
    assert stored(rows, multi=True, tail=UPSERT) == stored(rows, multi=False, tail=UPSERT)


def test_values_not_a_whole_number_of_rows_are_refused() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(TABLE)
    with pytest.raises(ValueError, match="rows of 2 values"):
        insert_values(conn, "INSERT INTO t VALUES", 2, ["a", 1, "b"])
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
