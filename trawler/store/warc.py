"""Raw responses as gzip WARC 1.1 files, crash-safe and readable by warcio.

Each record is its own gzip member (WARC 1.1 Annex D.2), so a reader can seek
straight to a record given its file offset, and a torn tail can be cut off at
a member boundary.

Records are built by hand (warc_record.py) rather than with ``warcio.warcwriter.WARCWriter``:
warcio's writer deflates at level 9, fixed, and spends as much again in
Python on header objects and digest wrappers; it managed ~1,900
request+response pairs/s for 20 KB HTML on one core of the dev machine,
below our 3,000 target. Deflate is most of the cost either way, so we pick
the level ourselves (1: ~4% larger than 9 for HTML, ~2x faster), store
already content-encoded payloads without recompressing them (level 0), and
use ISA-L (the optional ``isal`` package, same gzip format, ~5x faster) when
it is installed. Both release the GIL while they deflate (a 90 ms ISA-L call
stalls another thread no longer than the switch interval): what holds the
GIL, and so delays the event loop, is the Python work around them, which
warc_record.py keeps small. The tests read every file back with warcio's
``ArchiveIterator(check_digests=True)``.

Files are written as ``….warc.gz.open`` and renamed to ``….warc.gz`` once
complete (the Heritrix convention), so readers know which files are whole.
A name is ``PREFIX-YYYYMMDDhhmmssffffff-SERIAL-RANDOM.warc.gz`` (UTC, to the
microsecond): names sort in the order their files were begun.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import secrets
import socket
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from trawler.locks import create_locked, fsync_dir, if_abandoned
from trawler.records import FetchResult
from trawler.store.warc_record import (
    RecordIds,
    WarcDates,
    clean,
    http_head,
    is_content_encoded,
    request_target,
    response_headers,
    status_line,
    warc_record,
)

OPEN_SUFFIX = ".open"
WARC_SUFFIX = ".warc.gz"
_GZIP_WBITS = zlib.MAX_WBITS | 16  # zlib container = gzip member
_WRITE_BUFFER_BYTES = 1 << 20
# The machine's failures, not one record's: they fail the commit (store/base.py's too).
_DISK_ERRORS = (OSError, MemoryError)
log = logging.getLogger("trawler")
_SCAN_CHUNK_BYTES = 1 << 20
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n", re.IGNORECASE)


def _pick_deflate() -> Callable[[bytes, int, int], bytes]:
    try:
        # ISA-L at level 1: ~5x zlib's speed, smaller output than zlib level 6.
        return importlib.import_module("isal.isal_zlib").compress
    except ImportError:
        return zlib.compress


_DEFLATE = _pick_deflate()
_LEVEL_TEXT = 1  # zlib level 1 vs 9: ~4% larger for HTML, ~2x faster
_LEVEL_STORE = 0  # gzip/br payloads: deflating them again costs 4x storing, saves nothing


@dataclass(slots=True)
class WarcLocation:
    """Where a response record lives: file name (no directory) and its gzip member."""

    filename: str
    offset: int
    length: int


class WarcWriter:
    """Appends request/response record pairs to rotating ``.warc.gz`` files.

    Blocking file I/O: call it from a worker thread when on an event loop.
    Durability is explicit: nothing written is promised to survive a crash
    until ``flush()`` returns; ``position()`` then names the durable end of
    the open file, for the metadata store to commit alongside its pages.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str = "trawler",
        max_bytes: int = 1024**3,
        software: str = "Trawler/0.1",
        warcinfo: Mapping[str, str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.software = software
        self.extra_warcinfo = dict(warcinfo or {})
        self._hostname = socket.gethostname()
        self._serial = 0
        self._file: BinaryIO | None = None
        self._name = ""  # final name of the open file, without .open
        self._size = 0  # bytes written to the open file
        self._flushed_size = 0  # bytes known durable
        self._warcinfo_id = ""
        self._ids = RecordIds()
        self._dates = WarcDates()

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write(self, result: FetchResult) -> WarcLocation | None:
        """Write the response and its request; None when no response was received."""
        if result.status is None:
            return None
        fields = self._begin_pair(result)
        response_id = self._ids.take()
        level = _LEVEL_STORE if is_content_encoded(result.headers) else _LEVEL_TEXT
        response = _gzip(_response_record(result, response_id, fields), level)
        request = _gzip(self._request_record(result, response_id, fields), _LEVEL_TEXT)
        if result.dom is not None:  # built before anything is written, as the pair is
            request += _gzip(_conversion_record(result, self._ids.take(), fields, response_id),
                             _LEVEL_TEXT)  # fmt: skip
        location = self._append_pair(response, request)
        for subresource in result.subresources:  # what the rendered page loaded
            self._write_subresource(subresource)
        return location

    def _write_subresource(self, result: FetchResult) -> None:
        """A request a rendered page made; one that cannot be archived costs itself only."""
        try:
            self.write(result)
        except _DISK_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - this response's data, not the disk
            log.warning("cannot archive %s (warc: %s)", result.url, " ".join(str(exc).split()))

    def _begin_pair(self, result: FetchResult) -> str:
        """Rotate when due; the fields a record and its request share, in the order
        they have always had."""
        if self._file is None or self._size >= self.max_bytes:
            self._rotate()
        fields = (
            f"WARC-Date: {self._dates.format(result.started_at)}\r\n"
            f"WARC-Target-URI: {clean(result.final_url)}\r\n"  # the fetcher keeps the last hop
            f"WARC-Warcinfo-ID: {self._warcinfo_id}\r\n"
        )
        if result.ip_address:
            fields += f"WARC-IP-Address: {clean(result.ip_address)}\r\n"
        return fields

    def _append_pair(self, record: bytes, request: bytes) -> WarcLocation:
        """Write a record and its request; where the record is."""
        assert self._file is not None
        self._file.write(record + request)
        location = WarcLocation(self._name, self._size, len(record))
        self._size += len(record) + len(request)
        return location

    def flush(self, fsync: bool = True) -> None:
        """Make everything written so far durable (one call per group commit)."""
        if self._file is None:
            return
        self._file.flush()
        if fsync:
            os.fsync(self._file.fileno())
        self._flushed_size = self._size

    def position(self) -> tuple[str, int] | None:
        """(file name, durable size) of the open file after the last flush; None if none."""
        if self._file is None:
            return None
        return self._name, self._flushed_size

    def close(self) -> None:
        """Flush, fsync and rename the open file to its final ``.warc.gz`` name."""
        if self._file is None:
            return
        try:
            self.flush(fsync=True)
            # Renamed before the file (and its lock) is closed: a repair by another
            # process never takes a file that is being finished.
            _finish(self.directory / (self._name + OPEN_SUFFIX))
        finally:
            file, self._file = self._file, None
            file.close()

    def _rotate(self) -> None:
        self.close()
        now_ns = time.time_ns()
        now = now_ns / 1e9
        # Microseconds: names sort in the order files were begun, across writers too
        # (a job resumed in the second it stopped; two runs' files went by the random part).
        seconds, fraction_ns = divmod(now_ns, 1_000_000_000)
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(seconds)) + f"{fraction_ns // 1000:06d}"
        self._name = f"{self.prefix}-{stamp}-{self._serial:05d}-{secrets.token_hex(4)}{WARC_SUFFIX}"
        self._serial += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / (self._name + OPEN_SUFFIX)
        # Locked for as long as it is open: recover() in another process leaves it
        # alone, whatever its name. Never overwrites a file. Closed in close().
        self._file = create_locked(path, _WRITE_BUFFER_BYTES)
        self._warcinfo_id = self._ids.take()
        info = _gzip(self._warcinfo_record(self._dates.format(now)), _LEVEL_TEXT)
        self._file.write(info)
        self._size = len(info)
        self._flushed_size = 0

    def _warcinfo_record(self, date: str) -> bytes:
        fields = {
            "software": self.software,
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.1/",
            "hostname": self._hostname,
            "robots": "obey",
            **self.extra_warcinfo,
        }
        body = "".join(f"{clean(k)}: {clean(v)}\r\n" for k, v in fields.items()).encode()
        head = (
            f"WARC-Type: warcinfo\r\nWARC-Record-ID: {self._warcinfo_id}\r\n"
            f"WARC-Date: {date}\r\nWARC-Filename: {clean(self._name)}\r\n"
            "Content-Type: application/warc-fields\r\n"
        )
        return warc_record(head, body, b"", payload_digest=False)

    def _request_record(self, result: FetchResult, response_id: str, fields: str) -> bytes:
        netloc, target = request_target(result.final_url)
        headers = result.request_headers
        if not any(name.lower() == "host" for name, _ in headers):
            headers = [("Host", netloc), *headers]  # RFC 9112 §3.2: required
        head = http_head(f"GET {target} HTTP/{result.http_version}", headers)
        fields = (
            f"WARC-Type: request\r\nWARC-Record-ID: {self._ids.take()}\r\n{fields}"
            f"WARC-Concurrent-To: {response_id}\r\n"
            "Content-Type: application/http; msgtype=request\r\n"
        )
        return warc_record(fields, head, b"", payload_digest=True)


def _response_record(result: FetchResult, record_id: str, fields: str) -> bytes:
    assert result.status is not None
    head = http_head(
        status_line(result.http_version, result.status), response_headers(result.headers)
    )
    fields = (
        f"WARC-Type: response\r\nWARC-Record-ID: {record_id}\r\n{fields}"
        "Content-Type: application/http; msgtype=response\r\n"
    )
    return warc_record(fields, head, result.raw_body, payload_digest=True)


def _conversion_record(result: FetchResult, record_id: str, fields: str, response_id: str) -> bytes:
    """The rendered DOM of a page (WARC 1.1 §6.8: content converted from another
    record), referring to the response it was rendered from (§5.10 WARC-Refers-To)."""
    assert result.dom is not None
    fields = (
        f"WARC-Type: conversion\r\nWARC-Record-ID: {record_id}\r\n{fields}"
        f"WARC-Refers-To: {response_id}\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
    )
    return warc_record(fields, b"", result.dom, payload_digest=True)


def recover(
    directory: Path, committed: dict[str, int] | None = None, prefix: str = ""
) -> list[str]:
    """Repair and close every ``*.warc.gz.open`` file a crash left in ``directory``.

    A file still locked by its writer (a live process sharing the directory) is
    left alone: whatever its name, a file is recovered once its writer is gone.
    A file named in ``committed`` (final name → durable size from
    ``WarcWriter.position()``) is cut back to that size; any other is cut to the
    end of its last gzip member holding a complete WARC record. Files left
    empty are removed. Returns the final names of the files handled.
    """
    repaired = []
    for path in sorted(Path(directory).glob(f"{prefix}*{WARC_SUFFIX}{OPEN_SUFFIX}")):
        with if_abandoned(path) as abandoned:
            if abandoned:
                _repair(path, (committed or {}).get(path.name.removesuffix(OPEN_SUFFIX)))
                repaired.append(path.name.removesuffix(OPEN_SUFFIX))
    fsync_dir(Path(directory))
    return repaired


def _repair(path: Path, committed_size: int | None) -> None:
    """Cut ``path`` back to its committed size (or its last whole record) and finish it."""
    keep = committed_size
    if keep is None or keep > path.stat().st_size:
        keep = valid_end(path)
    if keep == 0:
        path.unlink()
        return
    with path.open("r+b") as f:
        f.truncate(keep)
        os.fsync(f.fileno())
    _finish(path)


def valid_end(path: Path) -> int:
    """Byte offset just after the last gzip member that holds a complete WARC record."""
    end = 0
    with path.open("rb") as f:
        for member_end, record in _iter_members(f):
            if not _is_complete_record(record):
                break
            end = member_end
    return end


def _iter_members(f: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield (end offset, decompressed bytes) per gzip member; stop at a torn or bad one."""
    offset = 0
    pending = b""
    while True:
        decompressor = zlib.decompressobj(_GZIP_WBITS)
        parts = []
        while not decompressor.eof:
            if not pending:
                pending = f.read(_SCAN_CHUNK_BYTES)
                if not pending:
                    return  # clean end of file, or a member cut short
            try:
                parts.append(decompressor.decompress(pending))
            except zlib.error:
                return  # garbage, e.g. a zero-filled tail after a crash
            consumed = len(pending) - len(decompressor.unused_data)
            offset += consumed
            pending = decompressor.unused_data
        yield offset, b"".join(parts)


def _is_complete_record(record: bytes) -> bool:
    """True when ``record`` is one WARC record: headers, Content-Length bytes, CRLF CRLF."""
    head_end = record.find(b"\r\n\r\n")
    if not record.startswith(b"WARC/") or head_end < 0:
        return False
    match = _CONTENT_LENGTH.search(record, 0, head_end + 2)
    if match is None:
        return False
    return len(record) == head_end + 4 + int(match.group(1)) + 4 and record.endswith(b"\r\n\r\n")


def _gzip(record: bytes, level: int) -> bytes:
    """One gzip member holding exactly one record (WARC 1.1 Annex D.2)."""
    if level == _LEVEL_STORE:
        return zlib.compress(record, _LEVEL_STORE, _GZIP_WBITS)  # stdlib stores fastest
    return _DEFLATE(record, level, _GZIP_WBITS)


def _finish(open_path: Path) -> None:
    """Rename ``x.warc.gz.open`` to ``x.warc.gz`` and make the rename durable."""
    open_path.rename(open_path.with_name(open_path.name.removesuffix(OPEN_SUFFIX)))
    fsync_dir(open_path.parent)
