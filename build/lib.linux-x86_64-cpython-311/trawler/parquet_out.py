"""Parquet output: a typed schema per row shape and a writer that streams rows into
row groups (`trawler export --format parquet`).

Rows arrive one at a time as the other formats get them (dicts of plain Python
values); the writer holds at most one row group in memory, cut at
``ROW_GROUP_ROWS`` rows or ``ROW_GROUP_BYTES`` of text, whichever comes first, so
memory stays flat however large the crawl (bench/RESULTS.md). Times stored as
epoch seconds (REAL) become ``timestamp[us, UTC]``; everything else keeps its
value. A reusable piece: give ``ParquetRowWriter`` a schema of your rows' columns
(``schema_for``) and a binary file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROW_GROUP_ROWS = 20_000
# Page text dominates a row's size: a group of long pages is cut early. The writer
# holds a group about four times over (Python strings, Arrow arrays, encoded pages):
# 16 MB of text peaks near 100 MB above the process's base (bench/RESULTS.md).
ROW_GROUP_BYTES = 16 * 1024 * 1024
# Columns of few distinct values, dictionary-encoded; URLs and text are mostly unique,
# and a dictionary tried on them costs memory and time for nothing.
DICTIONARY_COLUMNS = frozenset({
    "status", "content_type", "depth", "kind", "error", "warc_file", "rendered",
    "sitemap_changefreq", "decision", "noindex", "attempt", "tdm_source", "ai_robots_groups",
    "rel", "reason",
})  # fmt: skip
TIMESTAMP = pa.timestamp("us", tz="UTC")

# The type of every column an export row may have (store/sqlite_export.py
# EXPORT_COLUMNS, ``version`` of export_versions.py, ``text`` of Parquet exports).
COLUMN_TYPES: dict[str, pa.DataType] = {
    "url": pa.string(),
    "final_url": pa.string(),
    "status": pa.int16(),  # an HTTP status code: 100-999
    "content_type": pa.string(),
    "content_length": pa.int64(),
    "depth": pa.int32(),
    "parent_url": pa.string(),
    "title": pa.string(),
    "description": pa.string(),
    "keywords": pa.string(),
    "links_count": pa.int32(),
    "content_sha256": pa.string(),
    "fetched_at": TIMESTAMP,
    "fetch_duration_s": pa.float64(),
    "canonical": pa.string(),
    "noindex": pa.bool_(),
    "duplicate_of": pa.string(),
    "simhash": pa.string(),
    "sitemap_lastmod": pa.string(),  # as the sitemap wrote it (W3C datetime or not)
    "sitemap_changefreq": pa.string(),
    "rendered": pa.string(),
    "tdm_reservation": pa.bool_(),  # None: no statement found
    "tdm_policy": pa.string(),
    "tdm_source": pa.string(),
    "ai_robots_groups": pa.string(),  # comma-separated product tokens
    "ai_robots_disallowed": pa.string(),
    "error": pa.string(),
    "warc_file": pa.string(),
    "warc_offset": pa.int64(),
    "kind": pa.string(),
    "version": pa.int32(),
    "text": pa.large_string(),
    # the link graph's edges (`--graph`: graph.EDGE_COLUMNS)
    "from_url": pa.string(),
    "to_url": pa.string(),
    "anchor": pa.string(),
    "rel": pa.string(),
    "reason": pa.string(),
    # fetch_attempts rows (`--kind attempt`)
    "attempt": pa.int32(),
    "started_at": TIMESTAMP,
    "duration_s": pa.float64(),
    "decision": pa.string(),
    # a host's reuse reservations (`--hosts`: export_hosts.HOST_COLUMNS)
    "host": pa.string(),
    "pages": pa.int64(),
    "robots_status": pa.int16(),
    "robots_error": pa.string(),
    "tdmrep_json": pa.string(),  # found, absent, malformed, not_fetched, unknown
    "tdmrep_rules": pa.int32(),
}


def schema_for(columns: Sequence[str]) -> pa.Schema:
    """The Parquet schema of rows with these columns, in this order."""
    return pa.schema([pa.field(name, COLUMN_TYPES[name]) for name in columns])


def _column_array(values: list, kind: pa.DataType) -> pa.Array:
    if kind == TIMESTAMP:
        seconds = pa.array(values, pa.float64())
        micros = pc.round(pc.multiply(seconds, 1_000_000.0))
        return pc.cast(micros, pa.int64()).cast(TIMESTAMP)
    return pa.array(values, kind)


class ParquetRowWriter:
    """Writes rows (dicts holding at least the schema's columns) to ``sink`` as Parquet,
    a row group at a time; ``close()`` writes the footer. ``count`` says how many."""

    def __init__(
        self,
        sink: BinaryIO,
        schema: pa.Schema,
        group_rows: int = ROW_GROUP_ROWS,
        group_bytes: int = ROW_GROUP_BYTES,
    ) -> None:
        self.count = 0
        self._schema = schema
        self._group_rows, self._group_bytes = group_rows, group_bytes
        dictionary = [name for name in schema.names if name in DICTIONARY_COLUMNS]
        self._writer = pq.ParquetWriter(sink, schema, compression="zstd", use_dictionary=dictionary)
        self._columns: dict[str, list] = {name: [] for name in schema.names}
        self._rows = self._bytes = 0

    def write(self, row: dict) -> None:
        for name, values in self._columns.items():
            value = row[name]
            values.append(value)
            if isinstance(value, str):
                self._bytes += len(value)
        self._rows += 1
        self.count += 1
        if self._rows >= self._group_rows or self._bytes >= self._group_bytes:
            self._flush()

    def close(self) -> None:
        """Write what is buffered and the file's footer (the sink stays open)."""
        self._flush()
        self._writer.close()

    def _flush(self) -> None:
        if not self._rows:
            return
        arrays = [_column_array(self._columns[field.name], field.type) for field in self._schema]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
        for values in self._columns.values():
            values.clear()
        self._rows = self._bytes = 0
