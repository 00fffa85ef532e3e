"""The robots.txt gate of the crawl loop, against a real server on loopback."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from trawler.config import CrawlConfig
from trawler.connectors import Connectors
from trawler.fetch import Fetcher
from trawler.frontier.sqlite import SqliteFrontier
from trawler.politeness import PolitenessPolicy
from trawler.records import FetchResult
from trawler.robots import Rules
from trawler.robotscache import RobotsEntry
from trawler.robotsgate import RobotsGate, Verdict

pytestmark = pytest.mark.timeout(30)


@asynccontextmanager
async def robots_server(answers: list[bytes]) -> AsyncIterator[int]:
    """Answers the n-th request with ``answers[n]`` (the last one from then on)."""
    served = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        try:
            for _ in range(20):  # bounded: a test sends a handful
                await reader.readuntil(b"\r\n\r\n")
                writer.write(answers[min(served, len(answers) - 1)])
                served += 1
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        srv.close()


def response(status: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def _first(site: str, entry: RobotsEntry) -> None:
    pass


def _archived(result: FetchResult, host: str) -> None:
    pass


@asynccontextmanager
async def gate_on(answers: list[bytes]) -> AsyncIterator[tuple[RobotsGate, SqliteFrontier, str]]:
    """A gate whose robots.txt comes from ``robots_server(answers)``; its host."""
    async with robots_server(answers) as port:
        connectors = Connectors()
        fetcher = Fetcher(CrawlConfig(allow_private=True), connectors=connectors)
        await fetcher.start()
        gate = RobotsGate(fetcher, "trawler", (0.2,), Counter(), _first, _archived)
        try:
            yield gate, SqliteFrontier(PolitenessPolicy(0.0)), f"127.0.0.1:{port}"
        finally:
            await fetcher.close()
            await connectors.close()


async def test_link_verdicts_follow_the_robots_txt_in_use() -> None:
    """The link filter's cached verdicts (``allows``) are those of the robots.txt
    the gate holds now: none while it is unavailable, then its rules once read."""
    unavailable = response("503 Service Unavailable", b"")
    rules = response("200 OK", b"User-agent: *\nDisallow: /private/\n")
    async with gate_on([unavailable, rules]) as (gate, frontier, host):
        private, public = f"http://{host}/private/1.html", f"http://{host}/p/1.html"
        assert gate.allows(private) is None  # not fetched yet
        assert await gate.verdict(private, host, frontier) is Verdict.LATER
        for _ in range(3):  # asked again and again, as a page's links are
            assert gate.allows(private) is None and gate.allows(public) is None
        await asyncio.sleep(0.3)  # past the retry wait
        assert await gate.verdict(public, host, frontier) is Verdict.ALLOW
        for _ in range(3):
            assert gate.allows(private) is False and gate.allows(public) is True
        assert await gate.verdict(private, host, frontier) is Verdict.DISALLOW


async def test_link_verdicts_change_with_a_new_robots_txt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A robots.txt read again (past its cache time: a day, shortened here) replaces
    the verdicts of the old one at once."""
    monkeypatch.setattr("trawler.robotscache.CACHE_TTL_S", 0.3)
    before = response("200 OK", b"User-agent: *\nDisallow: /private/\n")
    after = response("200 OK", b"User-agent: *\nDisallow: /p/\n")
    async with gate_on([before, after]) as (gate, frontier, host):
        private, public = f"http://{host}/private/1.html", f"http://{host}/p/1.html"
        assert await gate.verdict(public, host, frontier) is Verdict.ALLOW
        assert gate.allows(private) is False and gate.allows(public) is True
        await asyncio.sleep(0.4)  # past the cache time: read again
        assert await gate.verdict(public, host, frontier) is Verdict.DISALLOW
        assert gate.allows(private) is True and gate.allows(public) is False


async def test_a_url_asked_about_as_a_link_is_matched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch-time verdict of a URL the link filter asked about reuses its verdict:
    one robots.txt match a URL, not two (bench/RESULTS.md, issue 14 session 30)."""
    matched: list[str] = []
    allowed = Rules.allowed

    def counted(rules: Rules, url: str) -> bool:
        matched.append(url)
        return allowed(rules, url)

    monkeypatch.setattr(Rules, "allowed", counted)
    rules = response("200 OK", b"User-agent: *\nDisallow: /private/\n")
    async with gate_on([rules]) as (gate, frontier, host):
        private, public = f"http://{host}/private/1.html", f"http://{host}/p/1.html"
        assert await gate.verdict(f"http://{host}/", host, frontier) is Verdict.ALLOW
        assert gate.allows(private) is False and gate.allows(public) is True
        assert await gate.verdict(private, host, frontier) is Verdict.DISALLOW
        assert await gate.verdict(public, host, frontier) is Verdict.ALLOW
        assert matched == [f"http://{host}/", private, public]
