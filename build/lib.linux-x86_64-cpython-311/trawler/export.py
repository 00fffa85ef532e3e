"""Streaming export of rows (pages, sitemaps, robots.txt fetches: store/kinds.py) as
JSON lines, CSV or Parquet (parquet_out.py; memory flat in crawl size), and the output
file that appears only when complete."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import secrets
import sqlite3
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, TextIO

from trawler.export_versions import has_versions, versioned_rows
from trawler.locks import create_locked, fsync_dir, if_abandoned
from trawler.store.sqlite_export import EXPORT_COLUMNS, iter_pages

PARQUET, WACZ = "parquet", "wacz"


class RowWriter:
    """Writes export rows one at a time; ``count`` says how many."""

    def __init__(self, out: TextIO, fmt: str, columns: tuple[str, ...] = EXPORT_COLUMNS) -> None:
        self.out = out
        self.count = 0
        self._csv: csv.DictWriter | None = None
        if fmt == "csv":
            self._csv = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
            self._csv.writeheader()

    def write(self, row: dict) -> None:
        if self._csv is not None:
            self._csv.writerow(row)
        else:
            self.out.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.count += 1

    def close(self) -> None:
        """Nothing to finish: each row is written whole (Parquet's writer has a footer)."""


def with_text(fmt: str) -> bool:
    """Whether rows of this format carry the page's text: Parquet's do (columnar, so a
    reader that wants metadata only never reads it); a JSONL or CSV row stays short."""
    return fmt == PARQUET


class RowSink(Protocol):
    """What takes export rows: ``RowWriter``, ``ParquetRowWriter`` (parquet_out.py) or
    ``WaczWriter`` (wacz_out.py); ``close()`` finishes the output."""

    count: int

    def write(self, row: dict) -> None: ...

    def close(self) -> None: ...


def open_row_writer(
    out: TextIO, fmt: str, columns: tuple[str, ...], warc_dirs: tuple[Path, ...] = ()
) -> RowSink:
    """The writer of ``fmt`` rows to ``out`` (Parquet, WACZ: to its binary buffer; a
    WACZ takes the WARC files the rows name from ``warc_dirs``)."""
    if fmt == PARQUET:
        from trawler.parquet_out import ParquetRowWriter, schema_for  # pyarrow: when asked

        return ParquetRowWriter(out.buffer, schema_for(columns))
    if fmt == WACZ:
        from trawler.wacz_out import WaczWriter

        return WaczWriter(out.buffer, warc_dirs)
    return RowWriter(out, fmt, columns)


def write_rows(rows: Iterable[dict], out: TextIO, fmt: str, columns: tuple[str, ...],
               warc_dirs: tuple[Path, ...] = ()) -> int:  # fmt: skip
    """Rows through ``open_row_writer``, closed at the end; returns how many: the one
    loop behind every export (pages, attempts, edges, hosts)."""
    writer = open_row_writer(out, fmt, columns, warc_dirs)
    for row in rows:
        writer.write(row)
    writer.close()
    return writer.count


def write_export(
    conn: sqlite3.Connection, out: TextIO, fmt: str, include_noindex: bool, kinds: frozenset[str],
    versions: str = "latest", warc_dirs: tuple[Path, ...] = (),
) -> int:  # fmt: skip
    """Write the embedded store's rows of these kinds to ``out``; returns how many.
    ``versions``: a revisited page's latest version, or all (export_versions.py).
    ``warc_dirs``: where a WACZ takes the job's WARC files from."""
    rows = iter_pages(conn, include_noindex, kinds, with_text(fmt))
    columns: tuple[str, ...] = (*EXPORT_COLUMNS, "text") if with_text(fmt) else EXPORT_COLUMNS
    if has_versions(conn):
        rows, columns = versioned_rows(conn, rows, versions), (*columns, "version")
    return write_rows(rows, out, fmt, columns, warc_dirs)


class AtomicTextFile:
    """A text file that appears at ``path`` only when complete.

    Written beside ``path`` under a hidden temporary name, fsynced, then renamed
    over it: a reader never sees a truncated file, a killed export leaves an
    existing ``path`` as it was, and a failed one is discarded. The temporary
    file is locked while written, so a later export removes those of dead
    exports and leaves a running one's alone. ``path`` that is not a regular
    file (``/dev/stdout``, a FIFO) is written in place.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._temp: Path | None = None
        if path.exists() and not path.is_file():
            self.file: TextIO = path.open("w", encoding="utf-8", newline="")
            return
        _remove_abandoned_temps(path)
        self._temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        raw = create_locked(self._temp)
        self.file = io.TextIOWrapper(raw, encoding="utf-8", newline="")

    def commit(self) -> None:
        """Make the file durable and put it in place."""
        if self._temp is None:
            self.file.close()
            return
        self.file.flush()
        os.fsync(self.file.fileno())
        with contextlib.suppress(FileNotFoundError):  # keep the old file's permissions
            os.chmod(self._temp, stat.S_IMODE(self.path.stat().st_mode))
        os.replace(self._temp, self.path)  # while still locked: no sweeper takes it
        self.file.close()
        fsync_dir(self.path.parent)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        if self._temp is not None:
            self._temp.unlink(missing_ok=True)


def _remove_abandoned_temps(path: Path) -> None:
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        with if_abandoned(temp) as abandoned:
            if abandoned:
                temp.unlink(missing_ok=True)
