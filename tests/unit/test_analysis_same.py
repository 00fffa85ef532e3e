"""A page analysed in a parser process gets the same Analysis as inline.

The crawl sends pages to the parser processes and takes their analyses back in
whatever shape is cheapest to move (analysis_codec.py); the inline path
(``--parse-processes 0``) builds the records directly. Every field must agree:
the page row (title, text, hashes, canonical, robots meta, errors), the
followable links as crawl requests, and the rejected links by reason. The pages:
every document of the generated test web (HTML, sitemaps, robots.txt, binary
files) and hostile ones shaped like tests/e2e/hostile_server.py's.
"""

from __future__ import annotations

import asyncio
import codecs
import random

import pytest
from selectolax.lexbor import LexborHTMLParser

from tests.e2e.hostile_server import FRENCH
from tests.e2e.hostile_server import page as hostile_page
from trawler import parse
from trawler.analysis import Analysis, AnalysisPool, analyse, is_parsed
from trawler.charset import decode_html
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.outcome import REDIRECT_ELSEWHERE
from trawler.parse import parse_html
from trawler.records import CrawlRequest, FetchResult, Hop, ParsedPage
from trawler.resolve import Resolver
from trawler.sitegen import Site, SiteSpec
from trawler.urls import Normaliser, host_key

pytestmark = pytest.mark.timeout(120)
Page = tuple[CrawlRequest, FetchResult]
HOST = "a.test"


def fetched(url: str, body: bytes, content_type: str | None = "text/html", **more) -> Page:
    """A page as the fetcher hands it over, with the headers a server sends."""
    headers = [("Server", "nginx"), ("Content-Length", str(len(body))), ("X-Extra", "1")]
    headers += more.pop("headers", [])
    result = FetchResult(url, more.pop("final_url", url), more.pop("status", 200), headers,
                         content_type, more.pop("charset", None), body, body,
                         request_headers=[("User-Agent", "Trawler")], ip_address="127.0.0.1",
                         started_at=1_700_000_000.5, duration_s=0.0123456789, **more)  # fmt: skip
    request = CrawlRequest(url, 1, "http://a.test/parent", host_key(url), url_fingerprint(url),
                           attempts=1)  # fmt: skip
    return request, result


def site_pages() -> list[Page]:
    """Every document of a small generated web (trawler.sitegen), as crawled."""
    site = Site(SiteSpec(hosts=2, pages=12, port=8800))
    out = []
    for i in range(2):
        for path in site.paths(i):
            answer = site.page(i, path)
            assert answer is not None
            media, _, charset = answer.content_type.partition("; charset=")
            request, result = fetched(site.base(i) + path, answer.body, media,
                                      charset=charset or None)  # fmt: skip
            if path == "/sitemap.xml":
                request.kind = "sitemap"
            out.append((request, result))
    return out


def hostile_pages() -> list[Page]:
    malformed = (
        b"<html><head><title>Broken page</title><body><div><p>unclosed <b><i>tags</b>"
        b"<table><tr><td><a href='/canary/from-malformed-1'>one<td><a href=/canary/from-"
        b"malformed-2>two</table></div></span></p><<<>>>&&&;<a href=></a><!-- never closed"
    )
    title = "Café crème"
    utf16 = codecs.BOM_UTF16_LE + hostile_page(title).decode().encode("utf-16-le")
    many = b"<title>many</title>" + b"".join(b"<a href=m/%d>." % i for i in range(6_000))
    odd = hostile_page("odd", "../../../../dotdot", "/with space", "/ünïcödé?q=ü", "/%7Etilde",
                       "http://bücher.example/", "http://☃.example/snow", "mailto:x@y.z",
                       "/p?utm_source=x&b=2&a=1#frag", "//a.test/scheme-relative",
                       "http://b.test/elsewhere", "/cal/2031/01/01",
                       "javascript:void(0)")  # fmt: skip
    meta = (b"<html><head><base href='http://a.test/base/'><meta name=robots content='noindex'>"
            b"<meta name=trawler content='max-snippet: 20'><link rel=canonical href=other>"
            b"<meta name=description content='  a   b '><meta name=keywords content=k></head>"
            b"<body><nav>menu</nav><main>the <b>main</b> text</main><a href=x rel=nofollow>x</a>"
            b"<a href=y>y</a><svg><title>not it</title></svg></body></html>")  # fmt: skip
    u = "http://a.test/"
    own = '<link rel=canonical href="/self?a=2&amp;b=1&amp;utm_source=x#top">'
    final = '<link rel=canonical href="HTTP://A.TEST:80/final">'
    return [
        fetched(u + "malformed", malformed),
        fetched(u + "cp1252", hostile_page(title).decode().encode("cp1252"), charset="utf-8"),
        fetched(u + "long-cp1252", hostile_page(title, extra=FRENCH * 20).decode().encode("cp1252"),
                charset="bogus"),  # fmt: skip
        fetched(u + "sjis", '<meta charset="shift_jis"><title>日本語</title><p>こんにちは'.encode(
            "shift_jis")),  # fmt: skip
        fetched(u + "utf16", utf16),
        fetched(u + "binary", b"\x89PNG\r\n" + random.Random(7).randbytes(5_000)),
        fetched(u + "many", many),
        fetched(u + "odd/deep/links", odd),
        fetched(u + "meta", meta, headers=[("Link", '<http://a.test/h>; rel="canonical"')]),
        fetched(u + "header-nofollow", hostile_page("h", "/a", "/b"),
                headers=[("X-Robots-Tag", "nofollow"), ("x-robots-tag", "otherbot: noindex")]),
        fetched(u + "header-canonical", hostile_page("c", "/a"),
                headers=[("link", "<../canon>; rel=canonical")]),  # fmt: skip
        fetched(u + "self?b=1&a=2", hostile_page("s", extra=own),
                headers=[("Link", "</self?a=2&b=1&utm_source=x>; rel=canonical")]),
        fetched(u + "moved-here", hostile_page("m", extra=final), final_url=u + "final"),
        fetched(u + "sniffed", hostile_page("no type", "/s"), None),
        fetched(u + "plain", hostile_page("text/plain", "/t"), "text/plain"),
        fetched(u + "frameset", b"<html><frameset><frame src=/f></frameset></html>"),
        fetched(u + "deep", ("<div>" * 21_000).encode()),  # parse_too_complex (htmlbound.py)
        fetched(u + "redirected", hostile_page("moved", "/r"), final_url="http://a.test/final/"),
        fetched(u + "404", hostile_page("not found", "/n"), status=404),
        fetched(u + "timeout", b"<p>partial", error="timeout", error_detail="no body in time"),
        fetched(u + "elsewhere", b"<p>moved", status=200, error=REDIRECT_ELSEWHERE,
                final_url="http://b.test/", redirects=[Hop(u + "elsewhere", 301, "http://b.test/")]),
    ]  # fmt: skip


async def pooled(pages: list[Page], config: CrawlConfig) -> list[Analysis]:
    pool = AnalysisPool(config, 1)
    pool.start([HOST, "127.0.1.1:8800", "127.0.1.2:8800"])
    try:
        return list(await asyncio.gather(*(pool.analyse(*page) for page in pages)))
    finally:
        pool.close()


def inline(pages: list[Page], config: CrawlConfig) -> list[Analysis]:
    pool = AnalysisPool(config, 0)
    pool.start([HOST, "127.0.1.1:8800", "127.0.1.2:8800"])
    return [analyse(pool.analyser, *page) for page in pages]


@pytest.mark.parametrize(
    "config",
    [CrawlConfig(), CrawlConfig(max_links_per_page=100, max_depth=2, robots_agent="otherbot")],
    ids=["defaults", "options"],
)
def test_pages_analysed_in_a_parser_process_as_inline(config: CrawlConfig) -> None:
    pages = site_pages() + hostile_pages()
    expected = inline(pages, config)
    got = asyncio.run(pooled(pages, config))
    assert any(a.requests for a in expected) and any(a.outcome.page.simhash for a in expected)
    for (request, _), want, have in zip(pages, expected, got, strict=True):
        assert have == want, request.url


def test_canonical_elsewhere_as_the_crawl_loop_found_it() -> None:
    """The loop used to normalise every page's canonical URL (discovery.py); now the
    analysis does, and says the same: a duplicate of another URL, or none."""
    config = CrawlConfig()
    pages = site_pages() + hostile_pages()
    normalise = Normaliser(config.tracking_params)
    verdicts = []
    for (request, _), analysis in zip(pages, inline(pages, config), strict=True):
        page = analysis.outcome.page
        canonical = normalise(page.canonical) if page.canonical is not None else None
        own = (request.url, normalise(page.final_url))
        expected = None if canonical is None or canonical in own else canonical
        assert (analysis.canonical_elsewhere, page.duplicate_of) == (expected, expected)
        verdicts.append((page.canonical is not None, expected is not None))
    assert (True, True) in verdicts and (True, False) in verdicts
    assert verdicts.count((True, False)) > len(site_pages()) // 2  # most name themselves


def one_query_per_kind(body: bytes, url: str, charset: str | None) -> ParsedPage:
    """What parse_html read from a page before it found the elements in one walk:
    one css() query per kind of element, as parse.py did (and still does for the
    text). The title: the first <title> once the invisible elements are out, and
    before the site-wide blocks are (a <title> in a <header> is the page's)."""
    text, _ = decode_html(body, charset)
    tree = LexborHTMLParser(text.encode("utf-8", "replace"))
    page = ParsedPage()
    page.base_href = parse._base_href(tree.css("base[href]")[:1], url)
    resolver = Resolver(page.base_href or url)
    page.links = parse._links(tree.css("a[href], area[href]"), resolver, 100_000)
    page.canonical = parse._canonical(tree.css("link[rel][href]"), resolver)
    parse._read_meta(tree.css("meta[name]"), page, "trawler")
    page.text = parse._visible_text(tree)
    title = tree.css_first("title")
    page.title = parse._collapse(title.text()) if title is not None else None
    main = tree.css_first("main") or parse._only(tree.css("article"))
    if main is not None:
        page.main_text = " ".join(main.text(separator=" ").split())
    elif tree.css_first("nav, header, footer, aside") is None:
        page.main_text = page.text
    else:
        tree.strip_tags(["nav", "header", "footer", "aside"], recursive=True)
        page.main_text = " ".join(tree.body.text(separator=" ").split()) if tree.body else ""
    return page


def test_elements_found_in_one_walk_as_with_one_query_each() -> None:
    extra = [
        fetched("http://a.test/mixed", b"<base><base href=/b1/><base href=/b2/><map><area href=x>"
                b"</map><a href=y>y</a><svg><a href=z>z</a><title>t</title></svg><area href=w>"
                b"<link rel=canonical><link rel='Alternate CANONICAL' href=c1><link rel=canonical "
                b"href=c2><template><a href=t></a></template><meta name=A content=1><meta name>"
                b"<meta name=ROBOTS content=noindex><meta name=description content=' d  e '>"),
        fetched("http://a.test/none", b"plain words, no markup"),
        fetched("http://a.test/main", b"<header>h</header><main></main><main>2</main><p>t"),
        fetched("http://a.test/arts", b"<title>1</title><nav>n</nav><article>a</article><article>"
                b"b</article><aside><title>2</title></aside>"),
        fetched("http://a.test/art", b"<footer>f</footer><article>only</article>"),
        fetched("http://a.test/boiler", b"<body><header><title>in header</title></header>x"),
    ]  # fmt: skip
    for request, result in site_pages() + hostile_pages() + extra:
        if not is_parsed(result):
            continue
        page = parse_html(result.body, result.final_url, result.charset, 100_000)
        if page.error is not None:
            continue
        before = one_query_per_kind(result.body, result.final_url, result.charset)
        read = ("base_href", "links", "canonical", "description", "keywords", "meta_robots",
                "text", "main_text", "title")  # fmt: skip
        for name in read:
            assert getattr(page, name) == getattr(before, name), (request.url, name)
