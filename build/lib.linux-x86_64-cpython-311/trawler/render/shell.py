"""Whether a page needs a browser: the application-shell test and per-host learning.

Pure (STYLE.md rule 2): HTML text and parsed pages in, decisions out. ``--render
auto`` renders a page when its static HTML looks like the shell of a client-side
application: little visible text with a mount point (``#root``, ``#app``,
``#__next``…) left empty, a ``<noscript>`` asking for JavaScript, or a body made
of scripts only. A host whose rendered pages add nothing to their static HTML
(no link, no text) ``misses_to_stop`` times in a row is rendered no more: its
pages were complete without a browser, and rendering costs ~50x a parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from trawler.records import ParsedPage

# Render modes (--render).
NEVER, AUTO, ALWAYS = "never", "auto", "always"
RENDER_MODES = (NEVER, AUTO, ALWAYS)
# What was decided for a page (the `rendered` field of the store and exports).
RENDERED = "yes"  # the rendered DOM was analysed
STATIC = "no"  # auto: the static HTML looked complete
HOST_LEARNED = "no_host_learned"  # auto: this host's renders added nothing lately
FAILED = "failed"  # the browser failed (timeout, crash): the static HTML was analysed

# Ids (and React/Vue/Svelte/Angular roots) that client-side frameworks mount into.
MOUNT_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "main-app"})
_MOUNT_SELECTOR = ", ".join(f"[id='{name}']" for name in sorted(MOUNT_IDS)) + ", app-root"
_INVISIBLE = ["script", "style", "noscript", "template", "svg"]
_ASKS_FOR_JS = re.compile(r"javascript|enable js|\bjs\b", re.I)
# Below this much visible text a page is "little text": a heading and a footer line.
LITTLE_TEXT_CHARS = 200
# Text a render must add (beyond the static page's) to count as new content.
NEW_TEXT_CHARS = 40
DEFAULT_MISSES_TO_STOP = 5


@dataclass(slots=True, frozen=True)
class ShellSignals:
    """What the static HTML shows of a client-side application."""

    text_chars: int  # visible text (scripts, styles, noscript left out)
    empty_mount: bool  # a mount point (MOUNT_IDS, <app-root>) with no text in it
    noscript_asks_js: bool  # a <noscript> saying JavaScript is needed
    script_only_body: bool  # the body holds scripts (and empty elements) only
    scripts: int  # <script> elements anywhere


def shell_signals(html: str) -> ShellSignals:
    """Read the signals from a decoded document. Never raises on bad input."""
    tree = LexborHTMLParser(html)
    scripts = len(tree.css("script"))
    noscript = any(_ASKS_FOR_JS.search(n.text() or "") for n in tree.css("noscript"))
    empty_mount = any(not (n.text() or "").strip() for n in tree.css(_MOUNT_SELECTOR))
    tree.strip_tags(_INVISIBLE)
    body = tree.body
    text = " ".join((body.text(separator=" ") if body is not None else "").split())
    script_only = scripts > 0 and not text and not tree.css("body a[href], body img, body form")
    return ShellSignals(len(text), empty_mount, noscript, script_only, scripts)


def shell_reason(signals: ShellSignals) -> str | None:
    """Why the page looks like an application shell; None when it looks complete.
    Little text alone is not enough (a short static page is common): it takes a
    sign that a script is meant to fill the page."""
    little = signals.text_chars < LITTLE_TEXT_CHARS
    if signals.empty_mount and (little or signals.scripts > 0):
        return "empty_mount"
    if signals.script_only_body:
        return "script_only_body"
    if signals.noscript_asks_js and little:
        return "noscript"
    return None


def render_added(static: ParsedPage, rendered: ParsedPage) -> bool:
    """Whether rendering found anything the static HTML lacked: a link, or text."""
    static_links = {link.url for link in static.links}
    if any(link.url not in static_links for link in rendered.links):
        return True
    return len(rendered.text) >= len(static.text) + NEW_TEXT_CHARS


@dataclass(slots=True)
class HostLearning:
    """Per host: renders in a row that added nothing. One per crawl, never shared
    by module state (STYLE.md rule 5); the frontier keeps it across restarts."""

    misses_to_stop: int = DEFAULT_MISSES_TO_STOP
    misses: dict[str, int] = field(default_factory=dict)

    def renders(self, host: str) -> bool:
        """Whether ``host``'s shell-looking pages are still worth a browser."""
        return self.misses.get(host, 0) < self.misses_to_stop

    def set(self, host: str, misses: int) -> None:
        """The count as kept elsewhere (the frontier's, shared by a job's workers)."""
        if misses:
            self.misses[host] = misses
        else:
            self.misses.pop(host, None)

    def learn(self, host: str, added: bool) -> None:
        """A render of ``host`` added something (the count starts again) or not."""
        if added:
            self.misses.pop(host, None)
        else:
            self.misses[host] = self.misses.get(host, 0) + 1


def decide(mode: str, host: str, html: str, learning: HostLearning) -> str | None:
    """What to do with one HTML page: RENDERED (render it), STATIC, HOST_LEARNED;
    None with --render never (nothing recorded)."""
    if mode == NEVER:
        return None
    if mode == ALWAYS:
        return RENDERED
    if not learning.renders(host):
        return HOST_LEARNED
    return RENDERED if shell_reason(shell_signals(html)) is not None else STATIC
