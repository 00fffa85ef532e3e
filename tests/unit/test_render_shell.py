"""--render auto: the application-shell test and what a host teaches (render/shell.py);
what a rendered page may load (render/routing.py)."""

from __future__ import annotations

import pytest

from trawler.records import Link, ParsedPage
from trawler.render.routing import ALL, NONE, SAME_HOST, refusal
from trawler.render.shell import (
    ALWAYS,
    AUTO,
    HOST_LEARNED,
    NEVER,
    RENDERED,
    STATIC,
    HostLearning,
    decide,
    render_added,
    shell_reason,
    shell_signals,
)

PROSE = "<p>" + "Plain words a reader can read without a browser. " * 10 + "</p>"
SHELLS = {
    "react": '<html><body><div id="root"></div><script src="/main.js"></script></body></html>',
    "next": '<html><body><div id="__next"></div><script src="/_next/app.js"></script></body>',
    "vue": "<body><noscript>We're sorry but this app doesn't work without JavaScript"
    ' enabled.</noscript><div id="app"></div><script src="/app.js"></script></body>',
    "angular": "<body><app-root></app-root><script src=main.js></script></body>",
    "script_only": "<html><head><title>x</title></head><body><script>render()</script></body>",
    "noscript": "<body><h1>Shop</h1><noscript>Please enable JavaScript.</noscript></body>",
}
STATIC_PAGES = {
    "article": f"<html><body><h1>News</h1>{PROSE}<a href='/next'>next</a></body></html>",
    "server_rendered": f'<body><div id="__next">{PROSE}</div><script src="/h.js"></script></body>',
    "short_no_scripts": "<html><body><h1>Contact</h1><p>Call us.</p></body></html>",
    "short_with_analytics": "<body><p>About us.</p><a href=/a>a</a><script>track()</script></body>",
    "noscript_tracking_pixel": f"<body>{PROSE}<noscript><img src=/px.gif></noscript></body>",
    "empty": "",
    "broken": "<html><body><div id=root><<<>>></div",
}


@pytest.mark.parametrize("name", sorted(SHELLS))
def test_application_shells_are_rendered(name: str) -> None:
    assert shell_reason(shell_signals(SHELLS[name])) is not None


@pytest.mark.parametrize("name", sorted(STATIC_PAGES))
def test_complete_static_pages_are_not(name: str) -> None:
    assert shell_reason(shell_signals(STATIC_PAGES[name])) is None


def test_the_reasons_name_the_signal() -> None:
    assert shell_reason(shell_signals(SHELLS["react"])) == "empty_mount"
    assert shell_reason(shell_signals(SHELLS["script_only"])) == "script_only_body"
    assert shell_reason(shell_signals(SHELLS["noscript"])) == "noscript"


def page(text: str = "", *links: str) -> ParsedPage:
    return ParsedPage(text=text, links=[Link(url) for url in links])


def test_a_render_adds_links_or_text() -> None:
    static = page("Loading", "http://a.test/")
    assert render_added(static, page("Loading", "http://a.test/", "http://a.test/b"))
    assert render_added(static, page("Loading " + "more words " * 10, "http://a.test/"))
    assert not render_added(static, page("Loading!", "http://a.test/"))
    assert not render_added(static, page(""))


def test_a_host_is_rendered_no_more_after_misses_in_a_row() -> None:
    learning = HostLearning(misses_to_stop=3)
    for _ in range(2):
        learning.learn("a.test", added=False)
    learning.learn("a.test", added=True)  # the count starts again
    for _ in range(2):
        learning.learn("a.test", added=False)
    assert learning.renders("a.test")
    learning.learn("a.test", added=False)
    assert not learning.renders("a.test")
    assert learning.renders("b.test")  # per host


def test_decide_per_mode() -> None:
    learning = HostLearning(misses_to_stop=1)
    shell, article = SHELLS["react"], STATIC_PAGES["article"]
    assert decide(NEVER, "a.test", shell, learning) is None
    assert decide(ALWAYS, "a.test", article, learning) == RENDERED
    assert decide(AUTO, "a.test", shell, learning) == RENDERED
    assert decide(AUTO, "a.test", article, learning) == STATIC
    learning.learn("a.test", added=False)
    assert decide(AUTO, "a.test", shell, learning) == HOST_LEARNED
    assert decide(ALWAYS, "a.test", shell, learning) == RENDERED  # always means always


ROUTES = [
    ("http://a.test/app.js", "script", "a.test", SAME_HOST, None),
    ("http://a.test/api/links", "fetch", "a.test", SAME_HOST, None),
    ("http://cdn.test/lib.js", "script", "a.test", SAME_HOST, "third_party"),
    ("http://cdn.test/lib.js", "script", "a.test", ALL, None),
    ("http://a.test/app.js", "script", "a.test", NONE, "resources_off"),
    ("http://a.test/logo.png", "image", "a.test", ALL, "resource_type"),
    ("http://a.test/font.woff2", "font", "a.test", ALL, "resource_type"),
    ("http://a.test/clip.mp4", "media", "a.test", ALL, "resource_type"),
    ("http://a.test/frame", "document", "a.test", ALL, "navigation"),
    ("ws://a.test/live", "websocket", "a.test", ALL, "scheme"),
    ("http://a.test:8080/x.js", "script", "a.test", SAME_HOST, "third_party"),  # host:port
]


@pytest.mark.parametrize(("url", "kind", "host", "mode", "reason"), ROUTES)
def test_what_a_rendered_page_may_load(
    url: str, kind: str, host: str, mode: str, reason: str | None
) -> None:
    assert refusal(url, kind, host, mode) == reason
