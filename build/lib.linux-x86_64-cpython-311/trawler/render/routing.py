"""What becomes of each request a rendered page makes (pure).

Every request the browser would send is intercepted (session.py): the page's own
document is answered with the response the crawler already fetched, and the rest
either go through the crawler (its host slots, robots.txt, private-network guard)
or are refused here. Nothing reaches the network from the browser itself.
"""

from __future__ import annotations

from trawler.urls import host_key

# --render-resources: whose subresources a rendered page may load.
SAME_HOST, ALL, NONE = "same-host", "all", "none"
RESOURCE_MODES = (SAME_HOST, ALL, NONE)
# Never loaded: they change neither the links nor the text, and cost the most bytes.
SKIPPED_TYPES = frozenset({"image", "media", "font"})
# Kinds of requests a page's scripts make that may carry links or text.
_SCHEMES = ("http://", "https://")


def refusal(url: str, resource_type: str, page_host: str, mode: str) -> str | None:
    """Why the page may not load ``url`` (a counter's name), or None: the crawler
    fetches it. ``resource_type`` is the browser's (Playwright ``resource_type``)."""
    if not url.startswith(_SCHEMES):
        return "scheme"
    if resource_type in SKIPPED_TYPES:
        return "resource_type"
    if resource_type == "document":  # frames and script-driven navigations: not followed
        return "navigation"
    if mode == NONE:
        return "resources_off"
    if mode == SAME_HOST and host_key_of(url) != page_host:
        return "third_party"
    return None


def host_key_of(url: str) -> str:
    """The politeness key of ``url`` ("" when it has none: refused as third party)."""
    try:
        return host_key(url)
    except (ValueError, IndexError):
        return ""
