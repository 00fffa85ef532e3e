"""parquet_out.py: rows become typed columns, cut into row groups by rows and by text."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trawler.parquet_out import ParquetRowWriter, schema_for

COLUMNS = ("url", "status", "fetched_at", "noindex", "text")


def _row(i: int, text: str | None = "x") -> dict:
    return {"url": f"http://a.test/{i}", "status": 200 if i % 3 else None,
            "fetched_at": 1_700_000_000.25 + i, "noindex": i % 2 == 0, "text": text}  # fmt: skip


def _write(path: Path, rows: list[dict], **limits: int) -> pq.ParquetFile:
    with path.open("wb") as sink:
        writer = ParquetRowWriter(sink, schema_for(COLUMNS), **limits)
        for row in rows:
            writer.write(row)
        writer.close()
        assert writer.count == len(rows)
    return pq.ParquetFile(path)


def test_rows_read_back_typed(tmp_path: Path) -> None:
    rows = [_row(i) for i in range(7)]
    table = _write(tmp_path / "a.parquet", rows).read()
    assert table.schema.field("status").type == pa.int16()
    assert table.schema.field("fetched_at").type == pa.timestamp("us", tz="UTC")
    back = table.to_pylist()
    assert [r["status"] for r in back] == [r["status"] for r in rows]
    assert back[1]["fetched_at"] == datetime(2023, 11, 14, 22, 13, 21, 250000, tzinfo=UTC)
    assert [r["noindex"] for r in back] == [r["noindex"] for r in rows]


def test_row_groups_cut_by_rows_and_by_text_bytes(tmp_path: Path) -> None:
    by_rows = _write(tmp_path / "rows.parquet", [_row(i) for i in range(35)], group_rows=10)
    assert [by_rows.metadata.row_group(g).num_rows for g in range(4)] == [10, 10, 10, 5]
    long = "w" * 1000
    by_bytes = _write(tmp_path / "bytes.parquet", [_row(i, long) for i in range(9)],
                      group_bytes=3000)  # fmt: skip
    # Three 1 kB texts (plus the URLs) pass 3,000 bytes: a group of three rows each.
    assert by_bytes.metadata.num_row_groups == 3
    assert by_bytes.read().column("text").to_pylist() == [long] * 9


def test_no_rows_is_an_empty_file_with_the_schema(tmp_path: Path) -> None:
    empty = _write(tmp_path / "empty.parquet", [])
    assert empty.metadata.num_rows == 0
    assert empty.schema_arrow.names == list(COLUMNS)
