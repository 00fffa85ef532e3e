"""The job's cache of scripts and stylesheets for rendered pages (render/cache.py)."""

from __future__ import annotations

from trawler.records import FetchResult
from trawler.render.cache import SubresourceCache


def answer(body: bytes, status: int = 200, control: str | None = None) -> FetchResult:
    headers = [("Cache-Control", control)] if control else []
    return FetchResult("u", "u", status, headers, "application/javascript", None, body)


def test_scripts_and_stylesheets_are_kept_data_is_not() -> None:
    cache = SubresourceCache()
    cache.put("http://a.test/app.js", "script", answer(b"js"))
    cache.put("http://a.test/site.css", "stylesheet", answer(b"css"))
    cache.put("http://a.test/api.json", "fetch", answer(b"{}"))
    assert cache.get("http://a.test/app.js", "script") is not None
    assert cache.get("http://a.test/site.css", "stylesheet") is not None
    assert cache.get("http://a.test/api.json", "fetch") is None
    assert cache.hits == 2


def test_no_store_errors_and_other_statuses_are_fetched_again() -> None:
    cache = SubresourceCache()
    cache.put("http://a.test/1.js", "script", answer(b"x", control="private, No-Store"))
    cache.put("http://a.test/2.js", "script", answer(b"x", status=404))
    cache.put("http://a.test/3.js", "script", answer(b"x", control="max-age=60"))
    assert cache.get("http://a.test/1.js", "script") is None
    assert cache.get("http://a.test/2.js", "script") is None
    assert cache.get("http://a.test/3.js", "script") is not None


def test_the_least_recently_used_go_first_over_the_budget() -> None:
    cache = SubresourceCache(max_bytes=10)
    for name in "abc":
        cache.put(f"http://a.test/{name}.js", "script", answer(b"1234"))
    assert cache.get("http://a.test/a.js", "script") is None  # 12 bytes > 10: a went
    assert cache.get("http://a.test/b.js", "script") is not None
    cache.put("http://a.test/d.js", "script", answer(b"1234"))  # c is now the oldest
    assert cache.get("http://a.test/c.js", "script") is None
    assert cache.get("http://a.test/b.js", "script") is not None
    cache.put("http://a.test/big.js", "script", answer(b"x" * 11))  # never fits
    assert cache.get("http://a.test/big.js", "script") is None
