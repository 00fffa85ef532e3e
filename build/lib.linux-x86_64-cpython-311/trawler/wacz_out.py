"""WACZ packaging of a job's WARC files (`trawler export --format wacz`), per the WACZ
1.1.1 spec (specs.webrecorder.net/wacz/1.1.1):

- ``archive/<name>.warc.gz``: each WARC file the job's rows name, stored as it is
  (ZIP "stored": the records are gzipped already, and a replayer reads them by offset);
- ``indexes/index.cdxj``: a sorted CDXJ index of them, made by cdxj-indexer (the
  indexer pywb and py-wacz use), its ``filename`` fields relative to ``archive/``;
- ``pages/pages.jsonl``: the pages list, a header line then a line per page the
  crawl fetched whole (2xx, no error): its URL as archived, capture time and title;
- ``datapackage.json``: every file above with its size and SHA-256, and
  ``datapackage-digest.json``: the SHA-256 of that one.

The writer takes export rows one at a time (a ``RowSink``, export.py), as the
Parquet and JSONL writers do, so both backends feed it the same way: it keeps the
set of WARC file names and spools the pages list to a temporary file; ``close()``
writes the ZIP. WARCs are copied in chunks, the index is sorted in bounded memory
(cdxj-indexer spills to temporary files), so memory stays flat.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, BinaryIO

WACZ_VERSION = "1.1.1"
PAGES_PATH, INDEX_PATH = "pages/pages.jsonl", "indexes/index.cdxj"
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
CHUNK_BYTES = 1024 * 1024
ZIP64_FROM_BYTES = 2**31  # ZIP's 32-bit sizes: a larger entry needs ZIP64 fields
INDEX_SORT_BYTES = 16 * 1024 * 1024  # cdxj-indexer sorts this much in memory, then spills


def page_entry(row: dict) -> dict | None:
    """The pages list's entry for an export row, or None for a row that is no page a
    replay could start from (robots.txt, sitemaps, errors, non-2xx, not archived)."""
    if row.get("kind") != "page" or row.get("error") is not None or not row.get("warc_file"):
        return None
    if not 200 <= (row.get("status") or 0) < 300 or row.get("fetched_at") is None:
        return None
    captured = datetime.fromtimestamp(row["fetched_at"], UTC)
    entry = {
        "id": hashlib.sha256(f"{row['url']} {row['fetched_at']}".encode()).hexdigest()[:32],
        "url": row.get("final_url") or row["url"],  # the WARC-Target-URI the index keys on
        "ts": captured.strftime("%Y-%m-%dT%H:%M:%S.") + f"{captured.microsecond // 1000:03d}Z",
    }
    if row.get("title"):
        entry["title"] = row["title"]
    return entry


class WaczWriter:
    """Takes export rows; ``close()`` writes the WACZ to ``sink`` (left open).
    ``count``: the pages listed."""

    def __init__(self, sink: BinaryIO, warc_dirs: Iterable[Path]) -> None:
        self.count = 0
        self._sink = sink
        self._warc_dirs = tuple(warc_dirs)
        self._warc_names: dict[str, None] = {}  # in first-seen order
        self._pages = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._pages.write(json.dumps(PAGES_HEADER).encode() + b"\n")

    def write(self, row: dict) -> None:
        if row.get("warc_file"):
            self._warc_names.setdefault(row["warc_file"])
        entry = page_entry(row)
        if entry is not None:
            self._pages.write(json.dumps(entry, ensure_ascii=False).encode() + b"\n")
            self.count += 1

    def close(self) -> None:
        """Write the package; FileNotFoundError names a WARC file in none of the dirs."""
        try:
            warcs = [self._find(name) for name in self._warc_names]
            with zipfile.ZipFile(self._sink, "w", allowZip64=True) as package:
                resources = [
                    _add(package, f"archive/{p.name}", p, zipfile.ZIP_STORED) for p in warcs
                ]
                with tempfile.TemporaryDirectory() as temp:
                    index = _write_index(warcs, Path(temp) / "index.cdxj")
                    resources.append(_add(package, INDEX_PATH, index, zipfile.ZIP_DEFLATED))
                resources.append(_add(package, PAGES_PATH, self._pages, zipfile.ZIP_DEFLATED))
                _add_datapackage(package, resources)
        finally:
            self._pages.close()

    def _find(self, name: str) -> Path:
        for directory in self._warc_dirs:
            if (directory / name).is_file():
                return directory / name
        dirs = ", ".join(str(d) for d in self._warc_dirs) or "no directory"
        raise FileNotFoundError(f"WARC file {name} of the job is in none of: {dirs}")


def _write_index(warcs: list[Path], path: Path) -> Path:
    """A sorted CDXJ index of ``warcs`` at ``path``; each line's ``filename`` is the
    WARC's name (as it is in archive/)."""
    from cdxj_indexer import CDXJIndexer

    indexer = CDXJIndexer(
        str(path), [str(warc) for warc in warcs], sort=True, max_sort_buff_size=INDEX_SORT_BYTES
    )
    indexer.process_all()
    return path


def _add(package: zipfile.ZipFile, name: str, source: Path | IO[bytes], method: int) -> dict:
    """Copy ``source`` (a path, or a temporary file read from its start) into the
    package as ``name``; its datapackage resource (size, SHA-256)."""
    file = source.open("rb") if isinstance(source, Path) else source
    try:
        file.seek(0)
        size = file.seek(0, 2)
        file.seek(0)
        info = zipfile.ZipInfo(name, date_time=datetime.now(UTC).timetuple()[:6])
        info.compress_type = method
        digest = hashlib.sha256()
        with package.open(info, "w", force_zip64=size >= ZIP64_FROM_BYTES) as entry:
            while chunk := file.read(CHUNK_BYTES):
                digest.update(chunk)
                entry.write(chunk)
    finally:
        if isinstance(source, Path):
            file.close()
    return {"name": Path(name).name.lower(), "path": name, "hash": f"sha256:{digest.hexdigest()}",
            "bytes": size}  # fmt: skip


def _add_datapackage(package: zipfile.ZipFile, resources: list[dict]) -> None:
    from trawler import __version__

    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    datapackage = {
        "profile": "data-package",
        "resources": resources,
        "created": created,
        "wacz_version": WACZ_VERSION,
        "software": f"Trawler {__version__}",
    }
    body = json.dumps(datapackage, indent=2).encode()
    package.writestr("datapackage.json", body, zipfile.ZIP_DEFLATED)
    digest = {"path": "datapackage.json", "hash": f"sha256:{hashlib.sha256(body).hexdigest()}"}
    package.writestr("datapackage-digest.json", json.dumps(digest, indent=2), zipfile.ZIP_DEFLATED)
