"""`trawler export --format parquet` and `--format wacz` after a real crawl, on both
backends: Parquet rows read back with pyarrow are the JSONL export's, row for row,
in typed columns with the page text beside them; the WACZ passes py-wacz's
validator, its WARCs read with warcio and every listed page is in its index."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.conftest import Served, run_trawler


def _crawl(crawl_backend: CrawlBackend, testsite: Served) -> Crawled:
    crawled = crawl_backend.crawl(testsite.seeds, "--delay", "0")
    assert crawled.returncode == 0, crawled.stderr
    return crawled


def _parquet_rows(path: Path) -> list[dict]:
    rows = pq.read_table(path).to_pylist()
    for row in rows:  # JSONL has epoch seconds
        row["fetched_at"] = row["fetched_at"] and row["fetched_at"].timestamp()
    return rows


def test_parquet_equals_jsonl_row_for_row(
    crawl_backend: CrawlBackend, testsite: Served, tmp_path: Path
) -> None:
    crawled = _crawl(crawl_backend, testsite)
    target = tmp_path / "pages.parquet"
    out = run_trawler("export", *crawled.source, "--kind", "all", "--include-noindex",
                      "--format", "parquet", "-o", str(target))  # fmt: skip
    assert out.returncode == 0, out.stderr
    expected = crawled.export("--kind", "all")
    rows = _parquet_rows(target)
    assert f"{len(expected)} rows written" in out.stderr
    kinds = {row["kind"] for row in expected}
    assert {"page", "robots"} <= kinds and any(row["error"] for row in expected)
    assert len(rows) == len(expected) > 40
    for got, want in zip(rows, expected, strict=True):
        text = got.pop("text")
        assert got.keys() == want.keys()
        got_at, want_at = got.pop("fetched_at"), want.pop("fetched_at")
        assert abs(got_at - want_at) < 1e-6  # timestamp[us]: to the microsecond
        assert got == want
        if want["kind"] == "page" and want["status"] == 200 and not want["error"]:
            assert text and len(text) > 20, want["url"]
        if want["kind"] == "robots":
            assert text is None

    schema = pq.read_schema(target)
    assert schema.field("status").type == pa.int16()
    assert schema.field("fetched_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("noindex").type == pa.bool_()
    assert schema.field("content_length").type == pa.int64()
    assert schema.field("text").type == pa.large_string()


def test_parquet_text_is_the_searched_text(
    crawl_backend: CrawlBackend, testsite: Served, tmp_path: Path
) -> None:
    crawled = _crawl(crawl_backend, testsite)
    target = tmp_path / "pages.parquet"
    out = run_trawler("export", *crawled.source, "--format", "parquet", "-o", str(target))
    assert out.returncode == 0, out.stderr
    rows = [row for row in pq.read_table(target).to_pylist() if row["text"]]
    assert rows
    page = rows[len(rows) // 2]
    word = max(page["text"].split(), key=len).strip(".,;:!?\"'()")
    hits = {hit["url"] for hit in crawled.search(f'"{word}"')}
    assert page["url"] in hits, (word, hits)


def test_attempts_as_parquet_equal_jsonl_and_count_every_try(
    crawl_backend: CrawlBackend, testsite: Served, tmp_path: Path
) -> None:
    crawled = _crawl(crawl_backend, testsite)
    target = tmp_path / "attempts.parquet"
    out = run_trawler("export", *crawled.source, "--attempts", "--format", "parquet",
                      "-o", str(target))  # fmt: skip
    assert out.returncode == 0, out.stderr
    expected = [json.loads(line) for line in crawled.export_text("--attempts").splitlines()]
    assert sum(crawled.stats()["fetch_attempts"].values()) == len(expected) > 40
    rows = pq.read_table(target).to_pylist()
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        got_at, want_at = got.pop("started_at"), want.pop("started_at")
        assert abs(got_at.timestamp() - want_at) < 1e-6
        assert got == want
    assert {row["decision"] for row in expected} >= {"done"}
    assert pq.read_schema(target).field("attempt").type == pa.int32()
    usage = run_trawler("export", *crawled.source, "--attempts", "--kind", "robots")
    assert usage.returncode == 2 and "--attempts exports the fetch log" in usage.stderr


def _wacz_validate(path: Path) -> str:
    """`wacz validate -f PATH`'s verdict line (py-wacz 0.6 exits 0 either way)."""
    checked = subprocess.run(
        [sys.executable, "-m", "wacz", "validate", "-f", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    return checked.stdout.strip().splitlines()[-1]


VALID = "Validation succeeded, the passed WACZ is valid"


def test_wacz_validates_and_holds_the_crawl(
    crawl_backend: CrawlBackend, testsite: Served, tmp_path: Path
) -> None:
    crawled = _crawl(crawl_backend, testsite)
    target = tmp_path / "crawl.wacz"
    warc_dirs = [] if crawl_backend.name == "embedded" else ["--warc-dir", str(crawled.warc_dir)]
    out = run_trawler("export", *crawled.source, "--format", "wacz", "-o", str(target),
                      *warc_dirs)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert _wacz_validate(target) == VALID
    assert out.stderr.strip().endswith(f"pages listed in {target}")

    rows = crawled.export("--kind", "all")
    with zipfile.ZipFile(target) as package:
        names = package.namelist()
        warcs = sorted(n for n in names if n.startswith("archive/"))
        assert warcs == sorted(f"archive/{name}" for name in {r["warc_file"] for r in rows})
        assert all(package.getinfo(n).compress_type == zipfile.ZIP_STORED for n in warcs)
        responses = set()
        for name in warcs:
            with package.open(name) as warc:
                for record in ArchiveIterator(warc):
                    if record.rec_type == "response":
                        responses.add(record.rec_headers.get_header("WARC-Target-URI"))
        index = package.read("indexes/index.cdxj").decode().splitlines()
        pages = [json.loads(line) for line in package.read("pages/pages.jsonl").splitlines()]
        datapackage = json.loads(package.read("datapackage.json"))

    assert index == sorted(index) and len(index) >= len(responses)
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in index}
    assert responses <= indexed
    assert pages[0]["format"] == "json-pages-1.0"
    fetched = [r for r in rows if r["kind"] == "page" and r["status"] == 200 and not r["error"]]
    assert len(pages) - 1 == len(fetched) > 10
    assert {page["url"] for page in pages[1:]} <= responses
    assert datapackage["wacz_version"] == "1.1.1"
    assert {r["path"] for r in datapackage["resources"]} == {
        *warcs, "indexes/index.cdxj", "pages/pages.jsonl"
    }  # fmt: skip


def test_wacz_validator_can_fail(tmp_path: Path) -> None:
    """The check above can fail: a package whose pages list differs from its hash."""
    data = _tiny_crawl(tmp_path)
    target = tmp_path / "crawl.wacz"
    out = run_trawler("export", "--data", str(data), "--format", "wacz", "-o", str(target))
    assert out.returncode == 0, out.stderr
    assert _wacz_validate(target) == VALID
    broken = tmp_path / "broken.wacz"
    with zipfile.ZipFile(target) as good, zipfile.ZipFile(broken, "w") as bad:
        for info in good.infolist():
            body = good.read(info)
            if info.filename == "pages/pages.jsonl":
                body = body.replace(b"Host 0", b"Host 9")
            bad.writestr(info, body)
    assert _wacz_validate(broken) == "Validation failed, the passed WACZ is invalid"


def _tiny_crawl(tmp_path: Path) -> Path:
    from tests.e2e.conftest import start_testsite

    served = start_testsite(tmp_path, hosts=1, pages=5)
    try:
        data = tmp_path / "data"
        out = run_trawler("crawl", served.seeds[0], "--data", str(data), "--allow-private",
                          "--delay", "0")  # fmt: skip
        assert out.returncode == 0, out.stderr
        return data
    finally:
        served.process.terminate()
        served.process.wait(10)


def _one_line_usage_error(out: subprocess.CompletedProcess[str], says: str) -> None:
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert says in out.stderr


def test_bad_option_combinations_exit_2_with_one_line(tmp_path: Path) -> None:
    data = ["--data", str(tmp_path / "nothing-here")]
    wacz = ["--format", "wacz", "-o", str(tmp_path / "x.wacz")]
    for args, says in (
        (["--format", "parquet"], "--format parquet writes a file: give --output FILE"),
        (["--format", "wacz"], "--format wacz writes a file"),
        ([*wacz, "--kind", "robots"], "--format wacz packages the whole job"),
        ([*wacz, "--versions", "all"], "--format wacz packages the whole job"),
        ([*wacz, "--include-noindex"], "--format wacz packages the whole job"),
        (["--format", "jsonl", "--warc-dir", str(tmp_path)], "--warc-dir goes with --format wacz"),
        ([*wacz, "--postgres", "postgresql://127.0.0.1:9/x", "--job", "j"], "needs --warc-dir"),
        (["--format", "orc", "-o", str(tmp_path / "x")], "orc"),
    ):
        _one_line_usage_error(run_trawler("export", *data, *args), says)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_failed_parquet_export_keeps_the_old_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "trawler.db").write_bytes(b"\x00" * 4096)  # not a database
    target = tmp_path / "pages.parquet"
    target.write_bytes(b"old")
    out = run_trawler("export", "--data", str(data), "-o", str(target), "--format", "parquet")
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "pages.parquet"]


def test_wacz_of_a_missing_warc_is_one_line_and_no_file(tmp_path: Path) -> None:
    data = _tiny_crawl(tmp_path)
    target = tmp_path / "crawl.wacz"
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    out = run_trawler("export", "--data", str(data), "--format", "wacz", "-o", str(target),
                      "--warc-dir", str(elsewhere))  # fmt: skip
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert f"of the job is in none of: {elsewhere}" in out.stderr
    assert not target.exists() and not list(tmp_path.glob(".crawl.wacz.*"))
