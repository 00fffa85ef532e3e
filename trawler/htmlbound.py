"""How deep an HTML document nests, estimated before the parser sees it. Pure.

lexbor's tree builder is quadratic in nesting depth: each block start tag
(``<div>``, ``<p>``, ``<ul>``, ...) first looks for a ``<p>`` "in button
scope" (HTML §13.2.6.4.7), a walk down the stack of open elements that only
stops at a scoping element. Measured on this machine: 10k nested ``<div>`` take
0.12 s, 20k 0.49 s, 100k (0.5 MB) about 14 s; ``<div><b>`` pairs cost twice
that. Inline, table and formatting nesting stays linear. So a document whose
estimated depth is over ``MAX_DEPTH`` is not parsed at all (``parse_too_complex``).

The estimate is one linear pass over the tags, a simplified stack of open
elements: void elements, and elements a second one of which closes the first
(``<p>``, ``<li>``, ``<td>``, ``<a>``, ...), are not pushed; an end tag pops up to its element
(as the tree builder does) and is ignored when that element is not open, so
sloppy but shallow markup (``<div><font>x</div>`` repeated) stays shallow.
Browsers do not render deeper trees either: Blink caps the parser's tree at 512.
"""

from __future__ import annotations

import re
from collections import Counter

MAX_DEPTH = 4096  # estimated depth; lexbor needs ~0.03 s here
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^>]*?(/?)>")
# HTML §13.1.2: void elements have no end tag.
_VOID = frozenset(
    b"area base basefont bgsound br col embed frame hr img input keygen link meta param "
    b"source track wbr".split()
)
# Elements that never stack up: the end tag may be omitted and the next one closes
# them (HTML §13.1.2.4: p, li, td, ...), the tree builder closes an open one
# first (§13.2.6.4.7: a and nobr by the adoption agency, button, select,
# headings), or ignores a nested one (form).
_NOT_NESTED = frozenset(
    b"p li dt dd option optgroup rb rt rp rtc tr td th thead tbody tfoot colgroup caption "
    b"html head body a nobr button select form h1 h2 h3 h4 h5 h6".split()
)
_FOREIGN = frozenset({b"svg", b"math"})  # inside these, "/>" really closes an element


def too_deep(html: bytes, max_depth: int = MAX_DEPTH) -> bool:
    """True when ``html`` nests more than ``max_depth`` elements deep (estimated)."""
    if html.count(b"<") <= max_depth:
        return False  # fewer tags than the bound: cannot nest deeper (and costs ~µs)
    return estimated_depth(html, max_depth) > max_depth


def estimated_depth(html: bytes, stop_at: int | None = None) -> int:
    """The deepest point of the simplified stack of open elements (stops past ``stop_at``)."""
    stack: list[bytes] = []
    open_count: Counter[bytes] = Counter()
    deepest = 0
    for closing, raw_name, self_closing in _TAG.findall(html):
        name = raw_name.lower()
        if closing:
            if open_count[name]:
                _pop_to(stack, open_count, name)
            continue
        if name in _VOID or name in _NOT_NESTED:
            continue
        # "/>" closes an element only in SVG and MathML; <div/> opens a div.
        if self_closing and (name in _FOREIGN or open_count[b"svg"] or open_count[b"math"]):
            continue
        stack.append(name)
        open_count[name] += 1
        if len(stack) > deepest:
            deepest = len(stack)
            if stop_at is not None and deepest > stop_at:
                break
    return deepest


def _pop_to(stack: list[bytes], open_count: Counter[bytes], name: bytes) -> None:
    while stack:
        popped = stack.pop()
        open_count[popped] -= 1
        if popped == name:
            return
