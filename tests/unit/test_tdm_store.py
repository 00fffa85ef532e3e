"""Reuse reservations in the embedded store: an older data directory gains the columns,
and the tdmrep.json fetches kept beside robots.txt's are never read as robots.txt."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from trawler.store import sqlite as store
from trawler.store import sqlite_schema as schema
from trawler.store.sqlite_read import robots_verdict
from trawler.tdmrep import KEPT_PROFILE_SUFFIX

SITE = "http://127.0.0.1:8000"


def test_an_older_data_directory_gains_the_columns(tmp_path: Path) -> None:
    conn = store.connect(tmp_path)
    for column in schema.RESERVATION_COLUMNS:
        conn.execute(f"ALTER TABLE pages DROP COLUMN {column}")
    conn.commit()
    conn.close()
    assert not schema.has_column(sqlite3.connect(tmp_path / store.DB_NAME), "pages", "tdm_source")
    conn = store.connect(tmp_path)  # a writer migrates
    assert all(schema.has_column(conn, "pages", c) for c in schema.RESERVATION_COLUMNS)
    conn.close()


def test_kept_tdmrep_json_is_not_read_as_robots_txt(tmp_path: Path) -> None:
    conn = store.connect(tmp_path)
    now = time.time()
    rows = [
        (SITE, "p", 200, None, b"User-agent: *\nDisallow: /x\n", now - 1, 0),
        # Newer, and its body would allow /x: the verdict must not come from it.
        (SITE, "p" + KEPT_PROFILE_SUFFIX, 200, None, b'[{"location": "/"}]', now, 0),
    ]
    conn.executemany("INSERT INTO robots VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    verdict = robots_verdict(conn, SITE + "/x", "trawler")
    assert verdict is not None and verdict["allowed"] is False and verdict["line"] == 2
    conn.close()
