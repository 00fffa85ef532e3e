"""`trawler export --graph`: the link graph's edge list as JSON lines, CSV or Parquet.

Rows stream from the store (store/sqlite_graph.py, store/pg_graph.py) into the
export's own writers (export.py ``open_row_writer``; Parquet by parquet_out.py, a
bounded row group at a time), so memory stays flat in the crawl's size.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from typing import TextIO

from trawler.export import open_row_writer, write_rows
from trawler.graph import EDGE_COLUMNS


def write_edges(rows: Iterable[dict], out: TextIO, fmt: str) -> int:
    """Write edge rows (store/sqlite_graph.iter_edges) to ``out``; returns how many."""
    return write_rows(rows, out, fmt, EDGE_COLUMNS)


async def awrite_edges(rows: AsyncIterable[dict], out: TextIO, fmt: str) -> int:
    """``write_edges`` of rows read from PostgreSQL (store/pg_graph.iter_edges)."""
    writer = open_row_writer(out, fmt, EDGE_COLUMNS)
    async for row in rows:
        writer.write(row)
    writer.close()
    return writer.count
