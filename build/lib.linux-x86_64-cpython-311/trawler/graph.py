"""The link graph: a page's links as edges (to URL, anchor text, rel, verdict). Pure.

Every ``<a href>`` and ``<area href>`` that resolves to an http(s) URL is an
edge, followed or not: links the crawl leaves out (out of scope, nofollow,
too deep, traps) are part of the web's graph all the same. An edge's
``reason`` is what the link filter decided from the link alone: None when it
admitted the link (the URL is then crawled unless it is known already, or
robots.txt, the blocklist or a host budget refuse it: the frontier's verdicts,
kept per URL), else ``bad_url``, ``nofollow`` (the link's rel or the page's
robots directives), ``depth``, ``out_of_scope`` or the trap rule's reason.

Edges are deduplicated per page: the same target, anchor text and rel once
(navigation repeats links; their number is the page's ``links_count``). The
target is the normalised URL, the crawl's own name for it (``to_fp`` its
fingerprint, the seen-set key, by which inbound links are counted), or the
URL as resolved when it does not normalise.
"""

from __future__ import annotations

from trawler.linkfilter import LinkFilter
from trawler.records import Edge, Link

EDGE_COLUMNS = ("from_url", "to_url", "anchor", "rel", "reason")


def page_edges(links: list[Link], filter_: LinkFilter, depth: int, nofollow: bool) -> list[Edge]:
    """The edges of a page's ``links`` whose links lead to ``depth`` (its depth + 1);
    ``nofollow``: the page's robots directives say so."""
    edges: list[Edge] = []
    seen: set[tuple[str, str | None, str | None]] = set()
    too_deep = filter_.max_depth is not None and depth > filter_.max_depth
    digest_of, allows = filter_.digest, filter_.scope.allows  # bound once: a loop per link
    for link in links:
        digest = digest_of(link.url)
        key = (link.url if digest is None else digest[0], link.anchor, link.rel)
        if key in seen:
            continue
        seen.add(key)
        if digest is None:
            edges.append((link.url, None, link.anchor, link.rel, "bad_url"))
            continue
        url, host, fp, trap = digest
        if nofollow or link.nofollow:
            reason: str | None = "nofollow"
        elif too_deep:
            reason = "depth"
        elif not allows(url, host):
            reason = "out_of_scope"
        else:
            reason = trap
        edges.append((url, fp, link.anchor, link.rel, reason))
    return edges
