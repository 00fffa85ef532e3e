"""trawler.charset and trawler.parse: charset decoding, HTML extraction and robots directives."""

from __future__ import annotations

import codecs
import html
import time

import pytest
from ada_url import join_url
from hypothesis import given, settings
from hypothesis import strategies as st

from trawler.charset import codec_for_label, decode_html
from trawler.htmlbound import MAX_WORK, estimated_work, too_complex
from trawler.parse import parse_html, parse_x_robots_tag
from trawler.records import Link, ParsedPage
from trawler.urls import normalise

PAGE_URL = "https://example.com/dir/page.html"

FRENCH = (
    "Le café est très bon. Où est la gare? Ça va très bien, merci. "
    "Déjà vu, l'élève et le garçon ont mangé une crème brûlée. "
)


def parse(markup: str, url: str = PAGE_URL, **kwargs) -> ParsedPage:
    return parse_html(markup.encode("utf-8"), url, **kwargs)


def hrefs(markup: str, url: str = PAGE_URL, **kwargs) -> list[str]:
    return [link.url for link in parse(markup, url, **kwargs).links]


# --- title, description, keywords, text -------------------------------------


def test_title_description_keywords():
    page = parse(
        "<html><head><title>\n  Hello \t  World  </title>"
        '<meta NAME="Description" content="  A   page\nabout things ">'
        '<meta name="KEYWORDS" content="crawler, python">'
        "</head><body>x</body></html>"
    )
    assert page.title == "Hello World"
    assert page.description == "A page about things"
    assert page.keywords == "crawler, python"


@pytest.mark.parametrize("head", ["", "<title></title>", "<title>  \n </title>"])
def test_missing_or_empty_title_is_none(head):
    page = parse(f"<html><head>{head}</head><body>text</body></html>")
    assert page.title is None
    assert page.description is None
    assert page.keywords is None


def test_svg_title_is_not_the_page_title():
    page = parse("<body><svg><title>icon</title></svg><p>hi</p></body>")
    assert page.title is None


def test_title_is_the_first_outside_svg_and_template():
    page = parse(
        "<head><template><title>inert</title></template></head>"
        "<body><svg><title>icon</title></svg><title>Real</title><title>Second</title></body>"
    )
    assert page.title == "Real"


def test_title_inside_a_site_wide_block_is_still_the_title():
    # document.title is the first <title> wherever it is; leaving the boilerplate
    # out of the main text must not take the title with it.
    page = parse("<body><header><title>Head</title></header><nav>menu</nav><p>hi</p></body>")
    assert page.title == "Head"
    assert page.main_text == "hi"


def test_visible_text_excludes_invisible_elements():
    page = parse(
        "<html><head><title>T</title><style>h1{}</style><script>var head=1</script></head>"
        "<body><h1>Heading</h1><script>alert('x')</script><style>p{color:red}</style>"
        "<noscript>enable js</noscript><template><p>tpl</p></template>"
        "<svg><text>svg text</text></svg>"
        "<p>First\n\n   paragraph</p><p>Second</p></body></html>"
    )
    assert page.text == "Heading First paragraph Second"


# --- links --------------------------------------------------------------------


def test_relative_links_resolve_against_page_url():
    assert hrefs(
        '<a href="other.html">a</a><a href="/root">b</a><a href="../up">c</a>'
        '<a href="?q=1">d</a><a href="//cdn.example.org/x">e</a>'
        '<a href="https://elsewhere.net/p#frag">f</a><map><area href="area.html"></map>'
    ) == [
        "https://example.com/dir/other.html",
        "https://example.com/root",
        "https://example.com/up",
        "https://example.com/dir/page.html?q=1",
        "https://cdn.example.org/x",
        "https://elsewhere.net/p#frag",
        "https://example.com/dir/area.html",
    ]


def test_base_href_changes_resolution():
    page = parse(
        '<head><base href="https://static.example.net/sub/"></head>'
        '<body><a href="a.html">a</a><a href="/b">b</a></body>'
    )
    assert page.base_href == "https://static.example.net/sub/"
    assert [link.url for link in page.links] == [
        "https://static.example.net/sub/a.html",
        "https://static.example.net/b",
    ]


def test_relative_base_href_resolves_against_page_url():
    page = parse('<base href="/other/"><a href="x">x</a>')
    assert page.base_href == "https://example.com/other/"
    assert page.links == [Link("https://example.com/other/x", anchor="x")]


def test_invalid_base_href_is_ignored():
    page = parse('<base href="javascript:void(0)"><a href="x">x</a>')
    assert page.base_href is None
    assert page.links == [Link("https://example.com/dir/x", anchor="x")]


def test_nofollow_is_a_case_insensitive_rel_token():
    page = parse(
        '<a href="/a" rel="NoFollow noopener">a</a><a href="/b" rel="nofollowing">b</a>'
        '<a href="/c">c</a><area href="/d" rel="nofollow">'
    )
    assert [(link.url.rsplit("/", 1)[1], link.nofollow) for link in page.links] == [
        ("a", True),
        ("b", False),
        ("c", False),
        ("d", True),
    ]


@pytest.mark.parametrize(
    "href",
    [
        "mailto:me@example.com",
        "javascript:void(0)",
        " JavaScript:alert(1)",
        "java\nscript:alert(1)",
        "tel:+123",
        "data:text/html,hi",
        "ftp://files.example.com/x",
        "",
        "   ",
        "#",
        "#top",
        " #top ",
    ],
)
def test_non_http_and_fragment_only_hrefs_are_dropped(href):
    assert hrefs(f'<a href="{html.escape(href)}">x</a>') == []


def test_anchor_without_href_is_ignored():
    assert hrefs('<a name="x">x</a><a>y</a>') == []


def test_whitespace_inside_hrefs_is_removed_like_browsers_do():
    assert hrefs('<a href=" \n /a/b\tc\n.html \t">x</a><a href="HTTP://Ex.com/P">y</a>') == [
        "https://example.com/a/bc.html",
        "http://Ex.com/P",
    ]


def test_links_are_capped_keeping_the_first():
    markup = "".join(f'<a href="/p{i}">{i}</a>' for i in range(10))
    assert hrefs(markup, max_links=3) == [f"https://example.com/p{i}" for i in range(3)]
    assert hrefs(markup, max_links=0) == []


def test_empty_query_replaces_the_base_query():
    # RFC 3986 §5.2.2: "?" is a reference with an empty query (urljoin gets this wrong).
    assert hrefs('<a href="?">x</a>', "https://example.com/a?q=1") == ["https://example.com/a?"]


def test_empty_path_segments_are_kept():
    assert hrefs('<a href="a//b">x</a>') == ["https://example.com/dir/a//b"]


def test_bad_ipv6_href_is_dropped():
    assert hrefs('<a href="//[::1/x">x</a><a href="/ok">ok</a>') == ["https://example.com/ok"]


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        # Windows-authored sites: browsers read "\\" as "/" in http(s) URLs
        ("\\products\\a.html", "https://example.com/products/a.html"),
        ("..\\up.html", "https://example.com/up.html"),
        ("\\\\cdn.example.org\\x", "https://cdn.example.org/x"),
        ("///other.example/path", "https://other.example/path"),
        # a special scheme other than the base's starts an absolute URL, the same one not
        ("http:/other.example/", "http://other.example/"),
        ("http:other.example/", "http://other.example/"),
        ("https:/other.example/", "https://example.com/other.example/"),
        ("https:page.html", "https://example.com/dir/page.html"),
        ("http://0x7f.1/", "http://0x7f.1/"),  # resolved; the Normaliser makes it 127.0.0.1
    ],
)
def test_hrefs_resolve_as_browsers_do(href, expected):
    assert hrefs(f'<a href="{html.escape(href)}">x</a>') == [expected]


@pytest.mark.parametrize("href", ["http://?", "https://#x", "http://[::1", "//?q", "http://a b/"])
def test_hrefs_without_a_host_are_dropped(href):
    assert [normalise(u) for u in hrefs(f'<a href="{html.escape(href)}">x</a>')] in ([], [None])


_HREF_PIECES = st.sampled_from(
    ["a", "b.html", "/", "//", ".", "..", "./", "../", "?", "q=1", "#", "f", ":", ";p", "%20", "é",
     "\\", "%2e", "@", "h.example", ":80", "[::1]", "0x7f"]
)  # fmt: skip
_HREF_PREFIXES = st.sampled_from(
    ["", "/", "//h.example", "http://x.org", "HTTPS://Y.org", "?", "https:", "http:", "\\\\",
     "HtTp:", "mailto:", "JavaScript:", "ftp://", "ws:", "a+b.c-d:", "0a:", " tel:"]
)  # fmt: skip
_BASES = st.sampled_from(
    [PAGE_URL, "https://example.com", "http://example.com/a;p?q=1", "http://u@h.com:8080/a/b/"]
)


@settings(max_examples=500, deadline=None)
@given(base=_BASES, prefix=_HREF_PREFIXES, pieces=st.lists(_HREF_PIECES, max_size=6))
def test_fast_link_resolution_matches_the_whatwg_parser(base, prefix, pieces):
    """Concatenation (the fast path) and ada, the WHATWG parser, give one URL once normalised."""
    href = prefix + "".join(pieces)
    links = parse_html(f'<a href="{html.escape(href)}">x</a>'.encode(), base).links
    got = normalise(links[0].url) if links else None
    try:
        reference = normalise(join_url(base, href))
    except ValueError:  # no URL at all
        reference = None
    if href.strip().startswith("#") or not href.strip():
        reference = None  # a same-document reference is no link
    assert got == reference


# --- canonical and robots -------------------------------------------------------


def test_canonical_is_made_absolute():
    page = parse('<head><link rel="Canonical" href="/canon?id=1"></head>')
    assert page.canonical == "https://example.com/canon?id=1"


def test_canonical_missing_or_not_http():
    assert parse('<link rel="stylesheet" href="/s.css">').canonical is None
    assert parse('<link rel="canonical" href="javascript:x">').canonical is None


def test_canonical_found_after_noscript_in_head():
    # With scripting off, an <img> inside <noscript> closes <head> early.
    page = parse(
        '<html><head><noscript><img src="p.gif"></noscript>'
        '<link rel="canonical" href="https://example.com/c"></head><body></body></html>'
    )
    assert page.canonical == "https://example.com/c"


def test_meta_robots_tokens():
    page = parse('<meta name="ROBOTS" content=" NoIndex , nofollow,max-snippet: 20 ">')
    assert page.meta_robots == {"noindex", "nofollow", "max-snippet:20"}


def test_crawler_specific_meta_robots():
    markup = (
        '<meta name="robots" content="noarchive"><meta name="trawler" content="noindex">'
        '<meta name="googlebot" content="nofollow">'
    )
    assert parse(markup).meta_robots == {"noarchive", "noindex"}
    assert parse(markup, agent_token="GoogleBot").meta_robots == {"noarchive", "nofollow"}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("none", {"noindex", "nofollow"}),
        ("all", set()),
        ("ALL, noarchive", {"noarchive"}),
        ("noindex nofollow", {"noindex", "nofollow"}),
        ("", set()),
    ],
)
def test_meta_robots_none_and_all(content, expected):
    assert parse(f'<meta name="robots" content="{content}">').meta_robots == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], set()),
        (["noindex, nofollow"], {"noindex", "nofollow"}),
        (["NOINDEX"], {"noindex"}),
        (["none"], {"noindex", "nofollow"}),
        (["all"], set()),
        (["trawler: noindex"], {"noindex"}),
        (["Trawler: noindex, nofollow"], {"noindex", "nofollow"}),
        (["otherbot: nofollow"], set()),
        (["otherbot: noindex, nofollow", "noarchive"], {"noarchive"}),
        (["otherbot: noindex", "trawler: nofollow"], {"nofollow"}),
        (["trawler: none"], {"noindex", "nofollow"}),
        (["otherbot: noindex, trawler: nofollow"], {"nofollow"}),
        (["*: noarchive"], {"noarchive"}),
        (["max-snippet: 20, noimageindex"], {"max-snippet:20", "noimageindex"}),
        (
            ["unavailable_after: 2030-01-01T00:00:00Z"],
            {"unavailable_after:2030-01-01t00:00:00z"},
        ),
    ],
)
def test_x_robots_tag(values, expected):
    assert parse_x_robots_tag(values, "trawler") == expected


# --- charsets -----------------------------------------------------------------


def test_utf8_fast_path():
    assert decode_html("Grüße, 世界".encode(), None) == ("Grüße, 世界", "utf-8")


def test_ascii_is_utf8():
    assert decode_html(b"<p>plain</p>", None) == ("<p>plain</p>", "utf-8")


def test_header_charset_is_used():
    body = "<p>café €5</p>".encode("cp1252")
    assert decode_html(body, "iso-8859-1") == ("<p>café €5</p>", "cp1252")
    assert decode_html("<p>привет</p>".encode("koi8-r"), "KOI8-R")[0] == "<p>привет</p>"


def test_header_charset_beats_meta():
    body = '<meta charset="shift_jis"><p>café</p>'.encode("cp1252")
    assert decode_html(body, "windows-1252")[1] == "cp1252"


@pytest.mark.parametrize(
    ("bom", "encoding", "codec"),
    [
        (codecs.BOM_UTF8, "utf-8", "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16-be"),
    ],
)
def test_bom_wins_over_header(bom, encoding, codec):
    text, used = decode_html(bom + "<p>Grüße</p>".encode(encoding), "iso-8859-1")
    assert (text, used) == ("<p>Grüße</p>", codec)


def test_meta_charset():
    body = '<html><head><meta charset="windows-1251"></head><p>Привет</p>'.encode("cp1251")
    page = parse_html(body, PAGE_URL)
    assert page.charset == "cp1251"
    assert page.text == "Привет"


def test_meta_http_equiv_content_type():
    body = (
        '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-15">'
        "<title>Prix : 5 €</title>"
    ).encode("iso-8859-15")
    page = parse_html(body, PAGE_URL)
    assert (page.title, page.charset) == ("Prix : 5 €", "iso8859-15")


def test_meta_utf16_means_utf8():
    assert decode_html('<meta charset="utf-16"><p>é</p>'.encode(), None)[1] == "utf-8"


def test_shift_jis_with_meta():
    body = (
        '<html><head><meta charset="Shift_JIS"><title>日本語のページ</title></head>'
        "<body>こんにちは世界</body></html>"
    ).encode("shift_jis")
    page = parse_html(body, PAGE_URL)
    assert (page.title, page.text, page.charset) == ("日本語のページ", "こんにちは世界", "cp932")


def test_undeclared_cp1252_is_detected():
    body = f"<html><body><p>{FRENCH * 3}</p></body></html>".encode("cp1252")
    text, used = decode_html(body, None)
    assert used == "cp1252"
    assert FRENCH in text


def test_undeclared_cyrillic_is_detected():
    sentence = "Привет, мир! Это пример текста на русском языке для проверки кодировки. "
    text, used = decode_html(f"<p>{sentence * 3}</p>".encode("cp1251"), None)
    assert used == "cp1251"
    assert sentence in text


def test_mostly_utf8_with_stray_bytes_stays_utf8():
    body = "Grüße aus Köln, schöne Straße. ".encode() * 5 + b"\xe9t\xe9"
    text, used = decode_html(body, None)
    assert used == "utf-8"
    assert text.endswith("\ufffdt\ufffd")


def test_wrong_header_charset_decodes_with_replacement():
    text, used = decode_html("<p>café</p>".encode("cp1252"), "utf-8")
    assert (text, used) == ("<p>caf\ufffd</p>", "utf-8")


@pytest.mark.parametrize("label", ["no-such-charset", "x-user-defined", "base64", "utf-7", ""])
def test_unknown_or_unusable_header_charset_is_ignored(label):
    assert decode_html("<p>Grüße</p>".encode(), label) == ("<p>Grüße</p>", "utf-8")


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("ISO-8859-1", "cp1252"),
        ("us-ascii", "cp1252"),
        ('"utf-8"', "utf-8"),
        ("UTF8", "utf-8"),
        ("gb2312", "gb18030"),
        ("Shift_JIS", "cp932"),
        ("euc_kr", "cp949"),
        ("latin_1", "cp1252"),
        ("windows-874", "cp874"),
        ("koi8-r", "koi8-r"),
        ("utf-16", "utf-16-le"),
        ("replacement", None),
        (None, None),
    ],
)
def test_codec_for_label_follows_whatwg(label, codec):
    assert codec_for_label(label) == codec


# --- hostile input ------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    [
        "",
        "<",
        "<html><head><title>Unclosed",
        "<a href='/x'>unclosed <b><i>nest</b></i><p><div></p></div>",
        "<<<>>>&&&;;<a href=>x</a><a href>y</a>",
        "<frameset><frame src='a.html'></frameset>",
        "<table><tr><td><a href=/t>t</td></table>",
        "<!-- unterminated comment <a href='/c'>",
        "<script>never closed <a href='/s'>",
    ],
)
def test_malformed_html_does_not_raise(markup):
    page = parse(markup)
    assert isinstance(page.text, str)


def test_unclosed_tags_still_give_title_and_links():
    page = parse("<html><head><title>Unclosed <body><a href='/x'>x<a href='/y'>y")
    assert page.title is not None
    page = parse("<title>T</title><p><a href='/x'>x<div><a href='/y'>y")
    assert page.title == "T"
    assert hrefs("<p><a href='/x'>x<div><a href='/y'>y") == [
        "https://example.com/x",
        "https://example.com/y",
    ]


def test_empty_body():
    page = parse_html(b"", PAGE_URL)
    assert (page.title, page.text, page.links, page.canonical) == (None, "", [], None)
    assert page.meta_robots == frozenset()


def test_nul_bytes():
    page = parse_html(b"<title>a\x00b</title><a href='/\x00'>x</a>", PAGE_URL)
    assert page.title is not None


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=4096), charset=st.sampled_from([None, "utf-8", "shift_jis", "x"]))
def test_arbitrary_bytes_never_raise(body, charset):
    page = parse_html(body, PAGE_URL, header_charset=charset)
    assert isinstance(page.text, str)
    assert page.charset


_HTML_PIECES = st.sampled_from(
    [
        "<a href='",
        "<a href=",
        "'>",
        ">",
        "<base href=",
        "<meta name=robots content='",
        "<meta charset=",
        "<link rel=canonical href=",
        "<title>",
        "</title>",
        "<script>",
        "<svg>",
        "<!--",
        "javascript:",
        "//",
        "#",
        "../",
        "?",
        "http://[",
        "none,",
        "\x00",
        "\t\n",
        "é",
        "\ud800",
    ]
)


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_HTML_PIECES, max_size=30), encoding=st.sampled_from(["utf-8", "utf-16"]))
def test_arbitrary_tag_soup_never_raises(pieces, encoding):
    body = "".join(pieces).encode(encoding, "surrogatepass")
    page = parse_html(body, PAGE_URL, max_links=5)
    assert len(page.links) <= 5
    assert all(link.url.startswith(("http://", "https://")) for link in page.links)


# --- bounded work: documents too costly to parse are not parsed -------------------


def test_deeply_nested_document_is_refused_quickly():
    levels = 100_000  # lexbor alone needs ~14 s for this (quadratic in depth)
    markup = "<body>" + "<div>" * levels + "<a href=/deep>x</a>" + "</div>" * levels
    started = time.process_time()
    page = parse(markup)
    assert time.process_time() - started < 2.0
    assert page.error == "parse_too_complex" and page.links == [] and page.text == ""


def test_many_blocks_at_moderate_depth_are_refused():
    markup = "<body>" + "<div>" * 4000 + "<div></div>" * 100_000  # lexbor: ~1 s, 9 s at 10 MB
    assert estimated_work(markup.encode()) > MAX_WORK
    assert parse(markup).error == "parse_too_complex"


@pytest.mark.parametrize(
    "markup",
    [
        "<div/>" * 30_000,  # "/>" does not close an HTML element: 30,000 nested divs
        "<div></x>" * 30_000,  # stray end tags close nothing
        "<ul><li>" * 30_000,
        "<div>" * 30_000,  # never closed
    ],
)
def test_work_estimate_is_not_fooled(markup):
    assert too_complex(markup.encode())


@pytest.mark.parametrize(
    "markup",
    [
        "<svg>" + "<path d='M0 0'/>" * 30_000 + "</svg>",  # self-closed in foreign content
        "<div><font>x</div>" * 30_000,  # sloppy but shallow: </div> closes the <font>
        "<p>x" * 30_000 + "<li>y" * 30_000 + "<br><img src=a>" * 30_000,  # implied ends, voids
        "<div><span>x</span></div>" * 30_000,
        "<a href=x>y" * 30_000,  # a new <a> closes the open one
        "<div>" * 100 + "<div><p>x</p></div>" * 30_000,  # big and 100 deep: ~6M
    ],
)
def test_big_ordinary_documents_are_parsed(markup):
    assert not too_complex(markup.encode())
    assert parse(markup).error is None
