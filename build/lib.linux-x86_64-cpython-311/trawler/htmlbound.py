"""How much work an HTML document will cost the parser, estimated before parsing. Pure.

lexbor's tree builder is quadratic in nesting depth: each block start tag
(``<div>``, ``<p>``, ``<ul>``, ...) first looks for a ``<p>`` "in button
scope" (HTML §13.2.6.4.7), a walk down the stack of open elements that only
stops at a scoping element. Measured on this machine: 10k nested ``<div>`` take
0.12 s, 20k 0.49 s, 100k (0.5 MB) about 14 s; 4,000 nested ``<div>`` and then
400,000 sibling ``<div></div>`` (4.4 MB) 3.8 s. Inline, table and formatting
nesting stays linear. So the work is about the sum, over the start tags, of the
depth each is opened at (2.4 ns a level here); a document over ``MAX_WORK`` is
not parsed at all (``parse_too_complex``). That also bounds the depth: 20,000
nested elements sum to ``MAX_WORK``.

The estimate is one linear pass over the tags, a simplified stack of open
elements: void elements, and elements a second one of which closes the first
(``<p>``, ``<li>``, ``<td>``, ``<a>``, ...), are not pushed; an end tag pops up
to its element (as the tree builder does) and is ignored when that element is
not open, so sloppy but shallow markup (``<div><font>x</div>`` repeated) stays
shallow. Browsers do not build deeper trees either: Blink caps its parser's
tree at 512 levels.
"""

from __future__ import annotations

import re
from collections import Counter

# Summed depth of the start tags: ~0.5 s of lexbor. A 10 MB page of ordinary
# markup (900k tags, 20 deep) sums to ~20M. A document with fewer than
# sqrt(2 * MAX_WORK) = 20k tags cannot reach it: not scanned.
MAX_WORK = 200_000_000
_SCAN_ABOVE_TAGS = 20_000
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


def too_complex(html: bytes) -> bool:
    """True when parsing ``html`` would cost more than ``MAX_WORK`` (estimated)."""
    if html.count(b"<") <= _SCAN_ABOVE_TAGS:
        return False  # cannot reach the bound (and costs ~µs)
    return estimated_work(html, MAX_WORK) > MAX_WORK


def estimated_work(html: bytes, stop_above: int | None = None) -> int:
    """Summed depth of the start tags in the simplified stack of open elements
    (the walk each one's scope check may take); stops once over ``stop_above``."""
    stack: list[bytes] = []
    open_count: Counter[bytes] = Counter()
    work = 0
    for closing, raw_name, self_closing in _TAG.findall(html):
        name = raw_name.lower()
        if closing:
            if open_count[name]:
                _pop_to(stack, open_count, name)
            continue
        work += len(stack)
        if stop_above is not None and work > stop_above:
            break
        if name in _VOID or name in _NOT_NESTED:
            continue
        # "/>" closes an element only in SVG and MathML; <div/> opens a div.
        if self_closing and (name in _FOREIGN or open_count[b"svg"] or open_count[b"math"]):
            continue
        stack.append(name)
        open_count[name] += 1
    return work


def _pop_to(stack: list[bytes], open_count: Counter[bytes], name: bytes) -> None:
    while stack:
        popped = stack.pop()
        open_count[popped] -= 1
        if popped == name:
            return
