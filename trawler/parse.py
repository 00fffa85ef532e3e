"""HTML → ParsedPage: decode the body, then extract title, meta, text and links.

Pure functions, no I/O. Decoding (charset.py) follows the WHATWG "encoding
sniffing" order (BOM, transport charset, ``<meta>`` prescan) and only then guesses.

Parsing uses selectolax's lexbor backend, the only one selectolax 1.0 still
ships (importing ``selectolax.parser``, the old modest backend, raises
ImportError there). Measured on this machine (one core, CPython 3.11): a
realistic 20 KB page with ~50 links takes ~300 µs in ``parse_html`` (about
3,300 pages/s per core). Lexbor's own parse is only ~50 µs of that; resolving
the links (~90 µs) and collapsing whitespace in the text (~70 µs) cost most.
Links are resolved as browsers resolve them (resolve.py, WHATWG URL).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from trawler.charset import decode_html
from trawler.htmlbound import too_complex
from trawler.records import Link, ParsedPage
from trawler.resolve import Resolver

# Elements whose content a browser does not render as page text.
_INVISIBLE_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "noembed"]
_INVISIBLE = frozenset(_INVISIBLE_TAGS)
_BOILERPLATE_TAGS = ["nav", "header", "footer", "aside"]
_MAIN_PARTS = "main, article, " + ", ".join(_BOILERPLATE_TAGS)
_VALUED_DIRECTIVES = frozenset(
    {"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"}
)
_USER_AGENT_TOKEN = re.compile(r"[a-z0-9_.*-]+")
# Every element read before the text, found in one walk of the tree: each css()
# call parses its selector and walks the whole document (~10 µs a page each).
_ELEMENTS = "a[href], area[href], base[href], link[rel][href], meta[name], title"
ANCHOR_MAX_CHARS = 500  # of a link's text kept in the link graph
_GROUP = {"a": "a", "area": "a", "base": "base", "link": "link", "meta": "meta", "title": "title"}


def parse_html(
    body: bytes,
    url: str,
    header_charset: str | None = None,
    max_links: int = 5000,
    agent_token: str = "trawler",
) -> ParsedPage:
    """Parse one HTML document fetched from ``url``. Never raises on bad input.

    A document that would cost the parser too much (htmlbound.py) comes back
    with ``error="parse_too_complex"`` and nothing extracted."""
    text, charset = decode_html(body, header_charset)
    # Pass UTF-8 bytes ourselves: str input would fail on lone surrogates.
    utf8 = text.encode("utf-8", "replace")
    if too_complex(utf8):
        return ParsedPage(charset=charset, error="parse_too_complex")
    tree = LexborHTMLParser(utf8)
    page = ParsedPage(charset=charset)
    elements = _elements(tree)
    page.base_href = _base_href(elements["base"], url)
    resolver = Resolver(page.base_href or url)
    page.links = _links(elements["a"], resolver, max_links)
    page.canonical = _canonical(elements["link"], resolver)
    _read_meta(elements["meta"], page, agent_token.lower())
    titles = elements["title"]
    title = titles[0] if titles and _rendered(titles[0]) else None
    page.text = _visible_text(tree)  # mutates the tree: the walk's nodes are read above
    if title is None and titles:  # the first <title> is an <svg>'s or the like:
        title = tree.css_first("title")  # the first once those are out
    page.title = _collapse(title.text()) if title is not None else None
    page.main_text = _main_text(tree, page.text)
    return page


def _collapse(text: str | None) -> str | None:
    """Collapse whitespace runs to one space; None for empty text."""
    if not text:
        return None
    return " ".join(text.split()) or None


def _elements(tree: LexborHTMLParser) -> dict[str, list[LexborNode]]:
    """The ``_ELEMENTS`` by kind ("a" for <a> and <area>), each in document order."""
    found: dict[str, list[LexborNode]] = {"a": [], "base": [], "link": [], "meta": [], "title": []}
    for node in tree.css(_ELEMENTS):
        group = _GROUP.get((node.tag or "").lower())
        if group is not None:  # always: the selector matches these tags only
            found[group].append(node)
    return found


def _rendered(node: LexborNode) -> bool:
    """Whether ``node`` is in no element whose content is no page text (an <svg> has
    <title>s of its own). The page's title is the first <title> wherever it stands
    (``document.title``), mostly the first the walk found: taken from there, the
    title costs no walk of its own (a ``css_first("title")`` did, 1.5 % of
    ``parse_html``: bench/bench_parse_pair.py). One node's ancestors, not every
    title's: an <svg> holding thousands of nested titles costs one walk up."""
    parent = node.parent
    while parent is not None:
        if parent.tag in _INVISIBLE:
            return False
        parent = parent.parent
    return True


def _base_href(bases: list[LexborNode], url: str) -> str | None:
    # HTML §4.2.3: the first <base> with an href sets the document base URL.
    if not bases:
        return None
    return Resolver(url).resolve(bases[0].attributes.get("href"))


def _links(anchors: list[LexborNode], resolver: Resolver, max_links: int) -> list[Link]:
    links: list[Link] = []
    if max_links <= 0:
        return links
    for node in anchors:
        attributes = node.attributes
        link_url = resolver.resolve(attributes.get("href"))
        if link_url is None:
            continue
        rel = attributes.get("rel")
        rels = rel.lower().split() if rel is not None else []
        links.append(Link(link_url, "nofollow" in rels, _anchor_text(node), " ".join(rels) or None))
        if len(links) >= max_links:
            break
    return links


def _anchor_text(node: LexborNode) -> str | None:
    """What the link says (the link graph's anchor text): an <area>'s alt text."""
    if (node.tag or "").lower() == "area":
        text = node.attributes.get("alt") or ""
    else:
        text = node.text(deep=True, separator=" ")
    return " ".join(text.split())[:ANCHOR_MAX_CHARS] or None


def _canonical(link_elements: list[LexborNode], resolver: Resolver) -> str | None:
    for node in link_elements:
        attributes = node.attributes
        if "canonical" in (attributes.get("rel") or "").lower().split():
            return resolver.resolve(attributes.get("href"))
    return None


def _read_meta(metas: list[LexborNode], page: ParsedPage, agent_token: str) -> None:
    robots: set[str] = set()
    for node in metas:
        attributes = node.attributes
        name = (attributes.get("name") or "").strip().lower()
        content = attributes.get("content") or ""
        if name == "description" and page.description is None:
            page.description = _collapse(content)
        elif name == "keywords" and page.keywords is None:
            page.keywords = _collapse(content)
        elif name in ("robots", agent_token):
            for item in content.split(","):
                robots.update(_directive_tokens(item))
        elif name == "tdm-reservation" and page.tdm_reservation is None:  # TDMRep (tdmrep.py)
            page.tdm_reservation = content
        elif name == "tdm-policy" and page.tdm_policy is None:
            page.tdm_policy = content
    page.meta_robots = _expand_directives(robots)


def _visible_text(tree: LexborHTMLParser) -> str:
    # One pass over the whole tree is about twice as fast as one over <body>.
    tree.strip_tags(_INVISIBLE_TAGS, recursive=True)
    body = tree.body
    if body is None:  # a <frameset> document has no body
        return ""
    return " ".join(body.text(separator=" ").split())


def _main_text(tree: LexborHTMLParser, text: str) -> str:
    """The page's own content: <main> (or the one <article>) if marked up, else the
    visible text without site-wide blocks, so template changes do not hide duplicates."""
    main, articles, boilerplate = _main_parts(tree)
    main = main or _only(articles)
    if main is not None:
        return " ".join(main.text(separator=" ").split())
    if not boilerplate:
        return text
    tree.strip_tags(_BOILERPLATE_TAGS, recursive=True)
    body = tree.body
    return " ".join(body.text(separator=" ").split()) if body is not None else ""


def _main_parts(tree: LexborHTMLParser) -> tuple[LexborNode | None, list[LexborNode], bool]:
    """The first <main>, the <article>s, whether any site-wide block: one walk."""
    main, articles, boilerplate = None, [], False
    for node in tree.css(_MAIN_PARTS):
        tag = (node.tag or "").lower()
        if tag == "main":
            main = main or node
        elif tag == "article":
            articles.append(node)
        else:
            boilerplate = True
    return main, articles, boilerplate


def _only(nodes: list[LexborNode]) -> LexborNode | None:
    return nodes[0] if len(nodes) == 1 else None


def parse_x_robots_tag(values: list[str], agent_token: str) -> frozenset[str]:
    """Directives from X-Robots-Tag header values that apply to ``agent_token``.

    Google's syntax: ``noindex, nofollow`` applies to every crawler;
    ``otherbot: noindex, nofollow`` only to otherbot, up to the end of that
    header value or the next ``agent:`` prefix. Directives with a value
    (``max-snippet: 20``) are kept as ``name:value``.
    """
    agent_token = agent_token.lower()
    directives: set[str] = set()
    for value in values:
        applies = True
        for item in value.split(","):
            head, colon, rest = item.partition(":")
            head = head.strip().lower()
            if colon and head not in _VALUED_DIRECTIVES and _USER_AGENT_TOKEN.fullmatch(head):
                applies = head in (agent_token, "*")
                item = rest
            if applies:
                directives.update(_directive_tokens(item))
    return _expand_directives(directives)


def _directive_tokens(item: str) -> list[str]:
    item = item.strip().lower()
    name, colon, value = item.partition(":")
    if colon:
        return [f"{name.strip()}:{' '.join(value.split())}"]
    return item.split()  # tolerate "noindex nofollow" written without commas


def _expand_directives(directives: set[str]) -> frozenset[str]:
    # "none" means noindex + nofollow; "all" is the default and adds nothing.
    if "none" in directives:
        directives |= {"noindex", "nofollow"}
    directives.discard("none")
    directives.discard("all")
    return frozenset(directives)
