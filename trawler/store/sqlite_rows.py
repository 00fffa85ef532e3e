"""Many rows into one SQLite table, in multi-row INSERT statements.

``executemany`` steps one statement once a row: SQLite resets it, binds the row
and runs its program's start-up each time. A statement of 64 rows (``VALUES
(...), (...), ...``) pays that once for 64: the link graph's edges, appended at
the end of their table, cost ~1/4 less (bench/RESULTS.md, "Issue 14, session
34: writer2"). Rows that land all over a B-tree (new URLs, provenance upserts)
measured no gain, and are left to ``executemany``. The rows go in the order
given, one at a time as SQLite sees them: the same rowids. A few sizes only
(64, 8, 1 rows), so that the statements stay in the connection's statement
cache.
"""

from __future__ import annotations

import sqlite3

ROWS_PER_STATEMENT = (64, 8, 1)  # a bigger one first; at most 999 values (old SQLite)


def insert_values(
    conn: sqlite3.Connection, head: str, width: int, values: list, tail: str = ""
) -> int:
    """``head`` (``INSERT INTO t (a, b) VALUES``) and ``tail`` (say, an ON CONFLICT
    clause) around rows of ``width`` values each, given flat; returns the rows changed."""
    if len(values) % width:  # a row of another width would shift every row after it
        raise ValueError(f"rows of {width} values expected, {len(values)} values given")
    row = "(" + ", ".join("?" * width) + ")"
    start, changed = 0, 0
    for rows in ROWS_PER_STATEMENT:
        step = rows * width
        end = start + (len(values) - start) // step * step
        if end > start:
            sql = f"{head} {', '.join([row] * rows)}{tail}"
            cursor = conn.executemany(sql, (values[i : i + step] for i in range(start, end, step)))
            changed += cursor.rowcount
            start = end
    return changed
