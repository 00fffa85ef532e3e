"""Streaming export of page rows as JSON lines or CSV (memory flat in crawl size)."""

from __future__ import annotations

import csv
import json
import sqlite3
from typing import TextIO

from trawler.store.sqlite import EXPORT_COLUMNS, iter_pages


class RowWriter:
    """Writes export rows one at a time; ``count`` says how many."""

    def __init__(self, out: TextIO, fmt: str) -> None:
        self.out = out
        self.count = 0
        self._csv: csv.DictWriter | None = None
        if fmt == "csv":
            self._csv = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
            self._csv.writeheader()

    def write(self, row: dict) -> None:
        if self._csv is not None:
            self._csv.writerow(row)
        else:
            self.out.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.count += 1


def write_export(conn: sqlite3.Connection, out: TextIO, fmt: str, include_noindex: bool) -> int:
    """Write every stored page of the embedded store to ``out``; returns the number of rows."""
    writer = RowWriter(out, fmt)
    for row in iter_pages(conn, include_noindex):
        writer.write(row)
    return writer.count
