"""`trawler export --graph`: the link graph's edge list as JSON lines, CSV or Parquet.

Rows stream from the store (store/sqlite_graph.py, store/pg_graph.py), so
memory stays flat in the crawl's size: Parquet is written a row group at a
time (``ROW_GROUP_ROWS`` edges each, then dropped), never as one table.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from typing import IO, TextIO

from trawler.export import RowWriter
from trawler.graph import EDGE_COLUMNS

ROW_GROUP_ROWS = 65_536  # edges a Parquet row group: ~10 MB of columns at most in memory


class ParquetRowWriter:
    """Writes rows (dicts of ``columns``, text or None) to a Parquet file, a row group
    at a time; ``close`` writes the last group and the footer."""

    def __init__(
        self, out: IO[bytes], columns: tuple[str, ...], group_rows: int = ROW_GROUP_ROWS
    ) -> None:
        import pyarrow as pa  # imported when asked for: ~0.2 s
        import pyarrow.parquet as pq

        self._pa = pa
        self.columns = columns
        self.schema = pa.schema([(name, pa.string()) for name in columns])
        self.group_rows = group_rows
        self._writer = pq.ParquetWriter(out, self.schema, compression="zstd")
        self._pending: dict[str, list] = {name: [] for name in columns}
        self._pending_rows = 0
        self.count = 0

    def write(self, row: dict) -> None:
        for name in self.columns:
            self._pending[name].append(row[name])
        self._pending_rows += 1
        self.count += 1
        if self._pending_rows >= self.group_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._pending_rows:
            return
        table = self._pa.Table.from_pydict(self._pending, schema=self.schema)
        self._writer.write_table(table, row_group_size=self._pending_rows)
        self._pending = {name: [] for name in self.columns}
        self._pending_rows = 0

    def close(self) -> None:
        self._flush()
        self._writer.close()


def edge_writer(out: TextIO, fmt: str) -> RowWriter | ParquetRowWriter:
    """A writer of edge rows to ``out`` (Parquet: to its binary buffer)."""
    if fmt != "parquet":
        return RowWriter(out, fmt, EDGE_COLUMNS)
    out.flush()
    return ParquetRowWriter(out.buffer, EDGE_COLUMNS)


def write_edges(rows: Iterable[dict], out: TextIO, fmt: str) -> int:
    """Write edge rows (store/sqlite_graph.iter_edges) to ``out``; returns how many."""
    writer = edge_writer(out, fmt)
    for row in rows:
        writer.write(row)
    _finish(writer)
    return writer.count


async def awrite_edges(rows: AsyncIterable[dict], out: TextIO, fmt: str) -> int:
    """``write_edges`` of rows read from PostgreSQL (store/pg_graph.iter_edges)."""
    writer = edge_writer(out, fmt)
    async for row in rows:
        writer.write(row)
    _finish(writer)
    return writer.count


def _finish(writer: RowWriter | ParquetRowWriter) -> None:
    if isinstance(writer, ParquetRowWriter):
        writer.close()
