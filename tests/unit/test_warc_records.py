"""WARC records of the fast builder are those of the plain one (warc_reference.py),
byte for byte once their random ids are set aside; dates, digests and ids as specified."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit import warc_reference as reference
from tests.unit.test_warc import HTML, make_result, only_file, read_records
from trawler.records import FetchResult
from trawler.store.warc import WarcWriter
from trawler.store.warc_record import RecordIds, WarcDates, request_target, sha1_base32

_ID = re.compile(rb"^(WARC-Record-ID|WARC-Concurrent-To|WARC-Warcinfo-ID): (.*)\r$", re.M)


def cases() -> list[FetchResult]:
    """Responses that take every branch of the record builder."""
    nginx = [
        ("Server", "nginx"), ("Date", "Wed, 25 Nov 2026 10:00:00 GMT"),
        ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(HTML))),
        ("Last-Modified", "Tue, 24 Nov 2026 10:00:00 GMT"), ("Connection", "keep-alive"),
        ('ETag', '"6924-1a2b"'), ("Accept-Ranges", "bytes"),
    ]  # fmt: skip
    bad_bytes = b"/caf\xe9.html".decode("utf-8", "surrogateescape")
    return [
        make_result(0, headers=nginx),
        make_result(1, headers=[*nginx, ("Transfer-Encoding", "chunked")]),
        make_result(2, headers=[("TRANSFER-ENCODING", "chunked"), ("X-A", "transfer-encoding")]),
        make_result(3, headers=[("X-Evil", "a\r\nWARC-Type: resource"), ("X\nB", "c\rd")]),
        make_result(15, headers=[("X-Cr", "a\rb")], request_headers=[("X-Lf", "c\nd")]),
        make_result(4, status=301, headers=[("Location", bad_bytes)], raw_body=b"", body=b""),
        make_result(5, status=599, headers=[], raw_body=b""),
        make_result(6, headers=[("Content-Encoding", "gzip")], raw_body=gzip.compress(HTML)),
        make_result(7, headers=[("content-encoding", "identity")]),
        make_result(8, request_headers=[("Host", "example.com:8080"), ("User-Agent", "T")]),
        make_result(9, request_headers=[("User-Agent", "T"), ("host", "example.com")]),
        make_result(10, request_headers=[]),
        make_result(11, ip_address=None, http_version="1.0", started_at=0.0),
        make_result(12, final_url="http://example.com", started_at=1_700_000_000.9999996),
        make_result(13, final_url="http://example.com/a b\r\nX: y", raw_body=os.urandom(3000)),
        make_result(14, status=404, started_at=1_700_000_001.0000004),
    ]


def members(path: Path) -> list[bytes]:
    """The decompressed gzip members of a WARC file, one record each."""
    data, records = path.read_bytes(), []
    while data:
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        records.append(inflate.decompress(data))
        assert inflate.eof
        data = inflate.unused_data
    return records


def ids(record: bytes) -> dict[bytes, str]:
    return {m.group(1): m.group(2).decode() for m in _ID.finditer(record)}


def test_records_equal_the_reference_byte_for_byte(tmp_path: Path) -> None:
    results = cases()
    with WarcWriter(tmp_path, warcinfo={"operator": "tests\r\nX"}) as writer:
        for result in results:
            writer.write(result)
    path = only_file(tmp_path)
    info, *pairs = members(path)
    assert len(pairs) == 2 * len(results)

    info_id = ids(info)[b"WARC-Record-ID"]
    date = info.split(b"WARC-Date: ")[1].split(b"\r\n")[0].decode()
    fields = {
        "software": "Trawler/0.1", "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
        "warc-format/warc-1.1/",
        "hostname": socket.gethostname(), "robots": "obey", "operator": "tests\r\nX",
    }  # fmt: skip
    assert info == reference.warcinfo_record(fields, info_id, date, path.name)

    for n, result in enumerate(results):
        response, request = pairs[2 * n], pairs[2 * n + 1]
        response_id = ids(response)[b"WARC-Record-ID"]
        request_ids = ids(request)
        assert request_ids[b"WARC-Concurrent-To"] == response_id
        assert ids(response)[b"WARC-Warcinfo-ID"] == request_ids[b"WARC-Warcinfo-ID"] == info_id
        date = reference.warc_date(result.started_at)
        assert response == reference.response_record(result, response_id, date, info_id), n
        expected = reference.request_record(
            result, request_ids[b"WARC-Record-ID"], response_id, date, info_id
        )
        assert request == expected, n


def warcio_view(path: Path) -> list[dict[str, Any]]:
    """Every record as warcio reads it, digests checked; random ids left out."""
    records = []
    for record, payload in read_records(path):
        fields = [(k, v) for k, v in record.rec_headers.headers if not k.endswith(("-ID", "-To"))]
        http = record.http_headers
        records.append({
            "type": record.rec_type, "fields": fields, "payload": payload,
            "http": (http.protocol, http.statusline, http.headers) if http else None,
        })  # fmt: skip
    return records


def test_warcio_reads_the_same_fields_as_from_the_reference(tmp_path: Path) -> None:
    results = cases()
    with WarcWriter(tmp_path / "new") as writer:
        for result in results:
            writer.write(result)
    new = only_file(tmp_path / "new")
    old = tmp_path / "old.warc.gz"
    with old.open("wb") as f:
        f.write(gzip.compress(members(new)[0]))  # the warcinfo: tested above
        for n, result in enumerate(results):
            date = reference.warc_date(result.started_at)
            f.write(gzip.compress(reference.response_record(result, f"<r{n}>", date, "<i>")))
            f.write(gzip.compress(reference.request_record(result, "<q>", f"<r{n}>", date, "<i>")))
    assert warcio_view(new) == warcio_view(old)


def test_warcio_check_and_index_accept_the_file(tmp_path: Path) -> None:
    with WarcWriter(tmp_path) as writer:
        locations = [writer.write(result) for result in cases()]
    path = only_file(tmp_path)
    warcio = [sys.executable, "-m", "warcio.cli"]
    checked = subprocess.run([*warcio, "check", "-v", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # One "digest pass" a record: the warcinfo, then a response and a request a page.
    assert checked.stdout.count("digest pass") == 1 + 2 * len(locations)
    assert "fail" not in checked.stdout
    indexed = subprocess.run(
        [*warcio, "index", "-f", "warc-type,offset,length", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in indexed.stdout.splitlines()]
    responses = [(int(r["offset"]), int(r["length"])) for r in rows if r["warc-type"] == "response"]
    assert responses == [(loc.offset, loc.length) for loc in locations if loc is not None]


def test_a_record_whose_url_cannot_be_encoded_raises_before_writing(tmp_path: Path) -> None:
    bad = make_result(final_url="http://example.com/\udce9")
    with WarcWriter(tmp_path) as writer:
        with pytest.raises(UnicodeEncodeError):
            writer.write(bad)
        writer.write(make_result(1))
    assert [r.rec_type for r, _ in read_records(only_file(tmp_path))] == [
        "warcinfo", "response", "request",
    ]  # fmt: skip


def timestamps() -> list[float]:
    rng = random.Random(14)
    edges = [0.0, 0.5, 1e-7, 4e-7, 5e-7, 6e-7, 0.9999995, 0.9999994999, 0.9999996, 0.999999]
    seconds = [1_700_000_000, 1_764_000_000, 2_000_000_000, 86_399, 951_782_399]
    values = [s + e for s in seconds for e in edges]
    values += [rng.uniform(0, 4e9) for _ in range(3000)]
    values += [1_764_000_000 + rng.randrange(10**7) / 1e6 for _ in range(3000)]
    values += [1_764_000_000 + k / 2e6 for k in range(-50, 50)]  # halves of a microsecond
    return values


def test_dates_are_the_text_datetime_gives() -> None:
    dates = WarcDates()
    for timestamp in timestamps():  # in and out of order: the second cache must follow
        assert dates.format(timestamp) == reference.warc_date(timestamp), repr(timestamp)
    assert dates.format(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"
    assert dates.format(1_700_000_000.9999996) == "2023-11-14T22:13:21.000000Z"


@pytest.mark.parametrize("timestamp", [253_402_300_800.0, 1e12, 1e20, float("nan"), float("inf")])
def test_dates_out_of_range_raise_as_datetime_does(timestamp: float) -> None:
    # base.archive_batch keeps such a page as a store_error: only a ValueError or an
    # OverflowError may come out, never an OSError (that would fail the whole commit).
    dates = WarcDates()
    dates.format(253_402_300_799.0)  # the last second of year 9999, cached
    with pytest.raises(Exception) as expected:
        reference.warc_date(timestamp)
    with pytest.raises(type(expected.value)):
        dates.format(timestamp)
    assert isinstance(expected.value, ValueError | OverflowError)


def test_record_ids_are_random_uuid4_urns() -> None:
    take = RecordIds(batch=8).take
    taken = [take() for _ in range(100)]  # several refills
    assert len(set(taken)) == len(taken)
    for record_id in taken:
        assert record_id.startswith("<urn:uuid:") and record_id.endswith(">")
        value = uuid.UUID(record_id[len("<urn:uuid:") : -1])
        assert value.version == 4 and value.variant == uuid.RFC_4122
        assert f"<urn:uuid:{value}>" == record_id


def test_base32_digest_is_base64s() -> None:
    rng = random.Random(32)
    for size in [0, 1, 19, 20, 2047, 2048, 5000, *(rng.randrange(10_000) for _ in range(300))]:
        data = rng.randbytes(size)
        expected = base64.b32encode(hashlib.sha1(data).digest()).decode()
        assert sha1_base32(data) == f"sha1:{expected}"


def urlsplit_target(url: str) -> tuple[str, str]:
    """What the request record was always given: urlsplit's netloc, path and query."""
    parts = urlsplit(url)
    return parts.netloc, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


_PRINTABLE = "aZ09-._~:@!$&'()*+,;=%/?#[]\\"
_URL_TEXT = st.sampled_from([_PRINTABLE, _PRINTABLE + " \t\r\n\x00\x7f\xe9\u3042\udce9"]).flatmap(
    lambda alphabet: st.text(alphabet=alphabet, max_size=30)
)  # printable ASCII only (the regex's), or with what sends a URL to urlsplit


@settings(max_examples=2000, deadline=None)
@given(
    prefix=st.sampled_from(["http://", "https://", "HTTP://", "ftp://", " http://", "http:/", ""]),
    rest=_URL_TEXT,
)
def test_request_target_splits_as_urlsplit_does(prefix: str, rest: str) -> None:
    url = prefix + rest
    try:
        expected = urlsplit_target(url)
    except ValueError as exc:  # unbalanced IPv6 brackets, bad Unicode in the netloc
        with pytest.raises(type(exc)):
            request_target(url)
        return
    assert request_target(url) == expected


@pytest.mark.parametrize(
    "url",
    ["http://a.test/p/1.html", "http://a.test", "http://a.test?x=1", "https://a.test/p?",
     "http://a.test/p?a?b", "http://u:p@a.test:8080/p;q?r=1&s=%20", "http:///x"],
)  # fmt: skip
def test_request_target_of_plain_urls(url: str) -> None:
    assert request_target(url) == urlsplit_target(url)
