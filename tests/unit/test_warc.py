"""WARC writer: files read back by warcio with digests checked, rotation, crash recovery."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord

from trawler.records import FetchResult
from trawler.store.warc import WarcLocation, WarcWriter, recover

HTML = b"<html><head><title>Hello</title></head><body>" + b"<p>fish</p>" * 500 + b"</body></html>"
STARTED_AT = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z


def make_result(n: int = 0, **overrides: Any) -> FetchResult:
    url = f"http://example.com/page/{n}?q=1"
    fields: dict[str, Any] = {
        "url": url,
        "final_url": url,
        "status": 200,
        "headers": [("Content-Type", "text/html"), ("Content-Length", str(len(HTML)))],
        "content_type": "text/html",
        "body": HTML,
        "raw_body": HTML,
        "request_headers": [("User-Agent", "Trawler/0.1"), ("Accept", "*/*")],
        "ip_address": "127.0.0.1",
        "started_at": STARTED_AT,
    }
    fields.update(overrides)
    return FetchResult(**fields)


def read_records(path: Path) -> list[tuple[ArcWarcRecord, bytes]]:
    """Every record in ``path`` with its raw payload; any digest mismatch raises."""
    records = []
    with path.open("rb") as f:
        for record in ArchiveIterator(f, check_digests="raise"):
            payload = record.raw_stream.read()
            assert record.digest_checker.passed is not False, record.digest_checker.problems
            records.append((record, payload))
    return records


def record_types(path: Path) -> list[str]:
    return [record.rec_type for record, _ in read_records(path)]


def only_file(directory: Path, pattern: str = "*.warc.gz") -> Path:
    (path,) = directory.glob(pattern)
    return path


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def test_round_trip_keeps_headers_body_and_links(tmp_path: Path) -> None:
    result = make_result(
        final_url="http://example.com/moved",
        headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
        redirects=[],
    )
    with WarcWriter(tmp_path) as writer:
        writer.write(result)

    records = read_records(only_file(tmp_path))
    assert [r.rec_type for r, _ in records] == ["warcinfo", "response", "request"]
    (info, info_body), (response, body), (request, _) = records

    headers = response.rec_headers
    assert headers.get_header("WARC-Target-URI") == "http://example.com/moved"
    assert headers.get_header("WARC-Date") == "2023-11-14T22:13:20.250000Z"
    assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
    assert headers.get_header("WARC-Payload-Digest") == sha1_b32(HTML)
    assert headers.get_header("Content-Type") == "application/http; msgtype=response"
    assert headers.get_header("WARC-Warcinfo-ID") == info.rec_headers.get_header("WARC-Record-ID")
    assert body == HTML

    http = response.http_headers
    assert http.statusline == "200 OK"
    assert http.protocol == "HTTP/1.1"
    assert http.get_header("Transfer-Encoding") is None  # the body is stored de-chunked
    assert http.get_header("X-Trawler-Original-Transfer-Encoding") == "chunked"

    assert request.rec_headers.get_header("WARC-Concurrent-To") == headers.get_header(
        "WARC-Record-ID"
    )
    assert request.rec_headers.get_header("WARC-Target-URI") == "http://example.com/moved"
    assert request.http_headers.protocol == "GET"
    assert request.http_headers.statusline == "/moved HTTP/1.1"
    assert request.http_headers.get_header("Host") == "example.com"
    assert request.http_headers.get_header("User-Agent") == "Trawler/0.1"

    assert info.rec_headers.get_header("WARC-Filename") == only_file(tmp_path).name
    assert b"format: WARC File Format 1.1\r\n" in info_body
    assert b"robots: obey\r\n" in info_body


def test_request_line_keeps_path_and_query(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        writer.write(make_result(7, request_headers=[("Host", "example.com:8080")]))
    request = read_records(only_file(tmp_path))[2][0]
    assert request.http_headers.statusline == "/page/7?q=1 HTTP/1.1"
    assert request.http_headers.get_header("Host") == "example.com:8080"  # not added twice


def test_content_encoded_payload_is_stored_as_sent(tmp_path: Path) -> None:
    wire = gzip.compress(HTML)
    result = make_result(headers=[("Content-Encoding", "gzip")], raw_body=wire)
    with WarcWriter(tmp_path) as writer:
        writer.write(result)

    with only_file(tmp_path).open("rb") as f:
        for record in ArchiveIterator(f, check_digests="raise"):
            if record.rec_type == "response":
                assert record.rec_headers.get_header("WARC-Payload-Digest") == sha1_b32(wire)
                assert record.content_stream().read() == HTML  # warcio decodes gzip


def test_location_points_at_the_response_member(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        locations = [writer.write(make_result(n)) for n in range(3)]
    path = only_file(tmp_path)
    data = path.read_bytes()
    for n, location in enumerate(locations):
        assert isinstance(location, WarcLocation)
        assert location.filename == path.name
        member = data[location.offset : location.offset + location.length]
        record = zlib.decompress(member, zlib.MAX_WBITS | 16)
        assert record.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")
        assert f"/page/{n}?".encode() in record
        with path.open("rb") as f:
            f.seek(location.offset)
            first = next(iter(ArchiveIterator(f)))
            assert first.rec_headers.get_header("WARC-Target-URI").endswith(f"/page/{n}?q=1")


def test_results_without_a_response_are_not_written(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        assert writer.write(make_result(status=None, error="dns", raw_body=b"")) is None
        assert writer.position() is None
        writer.write(make_result(1))
        assert writer.write(make_result(2, status=None, error="timeout")) is None
    assert record_types(only_file(tmp_path)) == ["warcinfo", "response", "request"]


def test_unknown_status_and_empty_body(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        writer.write(make_result(status=599, raw_body=b"", headers=[]))
    response = read_records(only_file(tmp_path))[1]
    assert response[0].http_headers.statusline == "599"
    assert response[1] == b""


def test_header_line_breaks_cannot_forge_fields(tmp_path: Path) -> None:
    result = make_result(headers=[("X-Evil", "a\r\nWARC-Type: resource")])
    with WarcWriter(tmp_path) as writer:
        writer.write(result)
    response = read_records(only_file(tmp_path))[1][0]
    assert response.http_headers.get_header("X-Evil") == "a  WARC-Type: resource"


def test_file_is_open_until_closed(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, prefix="job7")
    location = writer.write(make_result())
    assert location is not None
    open_file = only_file(tmp_path, "*.warc.gz.open")
    assert open_file.name == location.filename + ".open"
    assert open_file.name.startswith("job7-")
    assert not list(tmp_path.glob("*.warc.gz"))

    writer.flush()
    assert writer.position() == (location.filename, open_file.stat().st_size)
    writer.close()
    writer.close()  # idempotent
    assert not list(tmp_path.glob("*.open"))
    assert only_file(tmp_path).name == location.filename


def test_names_sort_in_the_order_written_across_writers(tmp_path: Path) -> None:
    """A job resumed within the same second as it stopped: the second run's file
    must sort after the first's (readers, WACZ packing, a restart's records in
    fetch order). Names stamped to the second, then a random part, sorted in any
    order (an e2e restart test read a 503 and its retry backwards)."""
    written = []
    for n in range(20):  # ~ms apart: most within one second
        writer = WarcWriter(tmp_path)
        location = writer.write(make_result(n))
        assert location is not None
        writer.close()
        written.append(location.filename)
    assert sorted(written) == written


def test_position_only_moves_on_flush(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    writer.write(make_result(1))
    name, before = writer.position() or ("", -1)
    assert before == 0
    writer.flush()
    writer.write(make_result(2))
    assert writer.position() == (name, (tmp_path / (name + ".open")).stat().st_size)
    writer.close()


def test_rotation_makes_several_complete_files(tmp_path: Path) -> None:
    with WarcWriter(tmp_path, max_bytes=5_000) as writer:
        locations = [writer.write(make_result(n, raw_body=os.urandom(3_000))) for n in range(6)]
    files = sorted(tmp_path.glob("*.warc.gz"))
    assert len(files) == 3
    assert not list(tmp_path.glob("*.open"))
    assert [f.name.split("-")[2] for f in files] == ["00000", "00001", "00002"]
    assert {loc.filename for loc in locations if loc} == {f.name for f in files}
    for path in files:
        assert record_types(path) == ["warcinfo"] + ["response", "request"] * 2


def write_then_crash(directory: Path) -> tuple[str, int, list[WarcLocation]]:
    """Write three pairs, flush, leave half a fourth response; return the flushed position."""
    writer = WarcWriter(directory)
    locations = [writer.write(make_result(n)) for n in range(3)]
    writer.flush()
    name, size = writer.position() or ("", 0)
    with WarcWriter(directory / "other") as other:
        torn = other.write(make_result(3))
    assert torn is not None
    member = (directory / "other" / torn.filename).read_bytes()[torn.offset :][: torn.length]
    writer._file = None  # abandon the writer as a crash would, without closing
    with (directory / (name + ".open")).open("ab") as f:
        f.write(member[: len(member) // 2])
    return name, size, [loc for loc in locations if loc]


def test_recover_cuts_a_torn_tail_by_scanning(tmp_path: Path) -> None:
    name, size, _ = write_then_crash(tmp_path)
    assert recover(tmp_path) == [name]
    path = tmp_path / name
    assert path.stat().st_size == size
    assert record_types(path) == ["warcinfo"] + ["response", "request"] * 3


def test_recover_cuts_to_the_committed_size(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path)
    writer.write(make_result(1))
    writer.flush()
    name, committed = writer.position() or ("", 0)
    writer.write(make_result(2))  # complete, but never committed
    writer.flush()
    writer._file = None
    assert recover(tmp_path, {name: committed}) == [name]
    assert record_types(tmp_path / name) == ["warcinfo", "response", "request"]


def test_recover_cuts_a_member_truncated_mid_way(tmp_path: Path) -> None:
    name, _, locations = write_then_crash(tmp_path)
    third = locations[2]
    os.truncate(tmp_path / (name + ".open"), third.offset + third.length // 2)
    recover(tmp_path)
    assert (tmp_path / name).stat().st_size == third.offset
    assert record_types(tmp_path / name) == ["warcinfo"] + ["response", "request"] * 2


def test_recover_drops_a_whole_member_holding_half_a_record(tmp_path: Path) -> None:
    name, size, _ = write_then_crash(tmp_path)
    open_path = tmp_path / (name + ".open")
    os.truncate(open_path, size)
    half_record = b"WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 100\r\n\r\nshort"
    with open_path.open("ab") as f:
        f.write(zlib.compress(half_record, 6, zlib.MAX_WBITS | 16))
        f.write(b"\0" * 4096)  # some filesystems leave zeros after a crash
    recover(tmp_path)
    assert (tmp_path / name).stat().st_size == size


def test_recover_removes_a_file_with_nothing_whole(tmp_path: Path) -> None:
    (tmp_path / "trawler-20240101000000-00000-abcd.warc.gz.open").write_bytes(b"\x1f\x8b\x08")
    assert recover(tmp_path) == ["trawler-20240101000000-00000-abcd.warc.gz"]
    assert list(tmp_path.iterdir()) == []


def test_recover_leaves_closed_files_alone(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        writer.write(make_result())
    before = only_file(tmp_path).read_bytes()
    assert recover(tmp_path) == []
    assert only_file(tmp_path).read_bytes() == before


CRASHING_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from trawler.records import FetchResult
    from trawler.store.warc import WarcWriter

    def result(n, size):
        url = f"http://example.com/{n}"
        body = os.urandom(size)
        return FetchResult(url=url, final_url=url, status=200, raw_body=body, body=body)

    writer = WarcWriter(Path(sys.argv[1]))
    for n in range(5):
        writer.write(result(n, 1_000))
    writer.flush()
    name, size = writer.position()
    print(name, size, flush=True)
    for n in range(5, 8):
        writer.write(result(n, 700_000))  # complete, never committed
    # A crash part-way through a write() leaves half of a member on disk.
    torn = writer.write(result(8, 100_000))
    writer.flush(fsync=False)
    os.truncate(Path(sys.argv[1]) / (torn.filename + ".open"), torn.offset + torn.length // 2)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("use_committed", [True, False])
def test_recover_after_kill_9(tmp_path: Path, use_committed: bool) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_CHILD, str(tmp_path)], capture_output=True, text=True
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    name, size = child.stdout.split()
    assert (tmp_path / (name + ".open")).stat().st_size > int(size)

    assert recover(tmp_path, {name: int(size)} if use_committed else None) == [name]
    types = record_types(tmp_path / name)
    assert types.count("response") == types.count("request") == (5 if use_committed else 8)
    if use_committed:
        assert (tmp_path / name).stat().st_size == int(size)


def test_header_bytes_that_are_not_text_are_archived_as_sent(tmp_path: Path) -> None:
    # The fetcher decodes header bytes with surrogateescape, as aiohttp does;
    # the writer gives back exactly the bytes the server sent.
    sent = b"Location: /caf\xe9.html"
    name, value = sent.decode("utf-8", "surrogateescape").split(": ")
    with WarcWriter(tmp_path) as writer:
        writer.write(make_result(status=301, headers=[(name, value)], body=b"", raw_body=b""))
    path = only_file(tmp_path)
    assert record_types(path) == ["warcinfo", "response", "request"]
    assert b"\r\n" + sent + b"\r\n" in gzip.decompress(path.read_bytes())
