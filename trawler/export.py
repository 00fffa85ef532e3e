"""Streaming export of page rows as JSON lines or CSV (memory flat in crawl size)."""

from __future__ import annotations

import csv
import json
import sqlite3
from typing import TextIO

from trawler.store.sqlite import EXPORT_COLUMNS, iter_pages


def write_export(conn: sqlite3.Connection, out: TextIO, fmt: str, include_noindex: bool) -> int:
    """Write every stored page to ``out``; returns the number of rows."""
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        write = writer.writerow
    else:
        dumps = json.dumps

        def write(row: dict) -> None:
            out.write(dumps(row, ensure_ascii=False) + "\n")

    for row in iter_pages(conn, include_noindex):
        write(row)
        count += 1
    return count
