"""Conditional GET (issue 15): a revisit's validators reach the server, a 304 has no
body and leaves the connection usable. A real aiohttp server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.unit.test_fetch import fetcher
from trawler.recrawl_visit import validators

pytestmark = pytest.mark.timeout(20)

ETAG = '"v1"'
LAST_MODIFIED = "Wed, 21 Oct 2015 07:28:00 GMT"
SEEN = web.AppKey("seen", list)


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    seen: list[dict[str, str]] = []

    async def page(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        if request.headers.get("If-None-Match") == ETAG:
            return web.Response(status=304, headers={"ETag": ETAG})
        headers = {"ETag": ETAG, "Last-Modified": LAST_MODIFIED}
        return web.Response(body=b"<p>hello</p>", content_type="text/html", headers=headers)

    app = web.Application()
    app.router.add_get("/p", page)
    app[SEEN] = seen
    srv = TestServer(app, host="127.0.0.1")
    await srv.start_server()
    yield srv
    await srv.close()


async def test_revisit_sends_validators_and_gets_304(server: TestServer) -> None:
    target = str(server.make_url("/p"))
    async with fetcher() as f:
        first = await f.fetch(target)
        assert first.status == 200
        etag, last_modified = validators(first.headers)
        assert (etag, last_modified) == (ETAG, LAST_MODIFIED)
        sent = (("If-None-Match", etag), ("If-Modified-Since", last_modified))
        again = await f.fetch(target, extra_headers=sent)
        after = await f.fetch(target)  # the connection a 304 left must still work
    assert again.status == 304 and again.error is None and again.raw_body == b""
    assert ("If-None-Match", ETAG) in again.request_headers  # archived as sent
    assert after.status == 200 and after.body == b"<p>hello</p>"
    seen = server.app[SEEN]
    assert "If-None-Match" not in seen[0]
    assert seen[1]["If-None-Match"] == ETAG
    assert seen[1]["If-Modified-Since"] == LAST_MODIFIED


async def test_validator_with_line_break_cannot_forge_a_header(server: TestServer) -> None:
    target = str(server.make_url("/p"))
    async with fetcher() as f:
        result = await f.fetch(target, extra_headers=(("If-None-Match", '"x"\r\nX-Evil: 1'),))
    assert result.status == 200
    assert "X-Evil" not in server.app[SEEN][0]
