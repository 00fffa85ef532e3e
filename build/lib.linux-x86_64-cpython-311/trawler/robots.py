"""robots.txt (RFC 9309): parse a file once, then answer "may I fetch this URL?".

Pure: no I/O. The fetcher downloads ``/robots.txt`` and calls :func:`parse`;
on a 4xx it uses :meth:`Rules.allow_all` (§2.3.1.3), on a 5xx or network
error :meth:`Rules.disallow_all` (§2.3.1.4).

Where RFC 9309 leaves room we follow Google's reference parser
(github.com/google/robotstxt), except where noted:

- Keys are matched case-insensitively by prefix, with Google's typos
  ("useragent", "user agent", "disalow", "dissallow", "dissalow", "diasllow",
  "disallaw", "site-map"); a missing colon is accepted when the line is
  exactly two words ("disallow /x"). Crawl-delay ("crawl-delay", "crawldelay",
  "crawl delay") is ours; Google ignores it.
- Our product token (§2.2.1): robotsagent.py.
- A user-agent line names the product written up to the first whitespace,
  "/" or "*" ("Googlebot/2.1" and "Googlebot*" name googlebot, "Foo Bar" names
  foo), compared with our token case-insensitively and whole: "Rule1Bot" is not
  "rule", "FooBot-News" is not "foobot" (Google compares only the leading
  ``[a-zA-Z_-]`` run). "*" or "* anything" names every agent.
  Consecutive user-agent lines share one group; any other keyed line
  (rule, sitemap, crawl-delay, unknown) ends that run, so a following
  user-agent line starts a new group; rules after a sitemap line still belong
  to the group above it (§2.2.4). Rules before the first group are ignored.
- Longest pattern wins, counted in octets of the normalised pattern (``*``
  and ``$`` included); Allow wins a tie. Empty patterns match nothing.
- Percent-encoding (§2.2.2, §2.2.3): URL path and patterns are both brought
  to one form before comparing: non-ASCII octets, controls, space and
  ``"<>\\^`{|}`` are %-encoded (UTF-8), hex is upper-cased, %-encoded
  unreserved characters (ALPHA DIGIT ``-._~``) are decoded (the RFC's
  ``/foo/bar/%62%61%7A`` = ``/foo/bar/baz``; Google does not decode), and
  literal ``*`` / ``$`` in a URL equal ``%2A`` / ``%24`` in a pattern (the
  RFC's §2.2.3 table). Other reserved characters stay distinct from their
  encodings: ``%2F`` is not ``/`` (RFC 3986 §6.2.2.2; Google agrees).
  Unlike Google, the URL is normalised too, so a raw IRI path ``/ツ`` matches.
- Google's "Allow: /dir/index.html also allows /dir/" is *not* applied: the
  RFC says the path MUST match, and a crawler should err on the polite side.
- Limits (§2.5): the first ``MAX_ROBOTS_BYTES`` (512 KiB) are parsed, cut back
  to the last whole line; bytes of a line past ``MAX_LINE_BYTES`` (Google's
  2083 * 8) are ignored. Invalid UTF-8 never raises: such bytes are kept as
  octets and %-encoded, like Google.
- Crawl-delay: the first valid (finite, >= 0) number in the chosen group.
- Sitemaps: every Sitemap line in the file, in order, duplicates dropped.
- ``/robots.txt`` (that path, no query) is always allowed (§2.2.2).

Speed: rules are compiled once per file, sorted longest first, so the first
match decides; one ``str.startswith(tuple_of_heads)`` call rules out most URLs,
plain patterns are a ``str.startswith``, wildcards a left-most ``str.find`` per
literal piece (linear, no regex back-tracking). Measured per ``allowed()``
(Python 3.11, shared 2-core dev box, best of 5): 20 plain rules ~1.0 µs (no
match) / ~2.1 µs (match); 20 rules incl. 4 wildcards ~3 µs; a non-ASCII URL
that needs %-encoding adds ~2 µs. Parsing a 600 KiB file takes ~130 ms. The
head pre-filter is linear in the number of rules: a 20 000-rule group costs
~40 µs per URL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from trawler.robotsagent import product_name, user_agent_token

MAX_ROBOTS_BYTES = 512 * 1024  # RFC 9309 §2.5: the limit MUST be at least 500 KiB
MAX_LINE_BYTES = 2083 * 8  # Google: the rest of a longer line is ignored

_USER_AGENT, _ALLOW, _DISALLOW, _SITEMAP, _CRAWL_DELAY, _UNKNOWN = range(6)
# Matched as prefixes of the lower-cased key, in this order (Google's typos too).
_KEY_PREFIXES: tuple[tuple[str, int], ...] = (
    *((k, _USER_AGENT) for k in ("user-agent", "useragent", "user agent")),
    ("allow", _ALLOW),
    *((k, _DISALLOW) for k in ("disallow", "dissallow", "dissalow", "disalow", "diasllow")),
    ("disallaw", _DISALLOW),
    *((k, _SITEMAP) for k in ("sitemap", "site-map")),
    *((k, _CRAWL_DELAY) for k in ("crawl-delay", "crawldelay", "crawl delay")),
)
_WS = " \t\v\f"  # ASCII whitespace (CR and LF never reach a line)
_BOMS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")  # Google skips a partial BOM too

_AUTHORITY = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?//[^/?#]*")
# Anything outside this set makes a path go through _canonical().
_NOT_CANONICAL = re.compile(r"[^A-Za-z0-9\-._~!&'()+,;=:@/?\[\]]")
_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!&'()+,;=:@/?\[\]]")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

_PREFIX, _EXACT, _GLOB = range(3)


@dataclass(slots=True, frozen=True)
class Verdict:
    """Why a URL is or is not allowed, for ``trawler robots URL``."""

    allowed: bool
    rule: str | None  # e.g. "Disallow: /private/"; None when no rule matched
    line: int | None  # 1-based line of that rule in robots.txt
    group: str | None  # user-agent(s) of the chosen group, e.g. "*" or "Trawler"


@dataclass(slots=True, frozen=True)
class _Rule:
    allow: bool
    priority: int  # RFC 9309 §2.2.2: octets of the (normalised) pattern
    line: int | None
    text: str  # as written, for Verdict.rule
    kind: int  # _PREFIX, _EXACT or _GLOB
    head: str  # literal text before the first "*"
    middle: tuple[str, ...] = ()  # literal pieces between "*"s (_GLOB only)
    last: str | None = None  # piece the path must end with ("...*x$")


class Rules:
    """The rules of the one group that applies to our user agent."""

    __slots__ = ("_rules", "_heads", "crawl_delay", "sitemaps", "group")

    def __init__(
        self,
        rules: list[_Rule] | None = None,
        crawl_delay: float | None = None,
        sitemaps: list[str] | None = None,
        group: str | None = None,
    ) -> None:
        # RFC 9309 §2.2.2: longest match first; Allow before Disallow on a tie.
        ordered = sorted(rules or [], key=lambda r: (-r.priority, not r.allow))
        self._rules = [(rule.head, rule.kind, rule) for rule in ordered]
        self._heads = tuple(dict.fromkeys(rule.head for rule in ordered))
        self.crawl_delay = crawl_delay
        self.sitemaps = sitemaps if sitemaps is not None else []
        self.group = group

    @classmethod
    def allow_all(cls) -> Rules:
        """RFC 9309 §2.3.1.3: robots.txt unavailable (4xx) — crawl anything."""
        return cls()

    @classmethod
    def disallow_all(cls) -> Rules:
        """RFC 9309 §2.3.1.4: robots.txt unreachable (5xx, network) — crawl nothing."""
        return cls([_compile(False, "/", None)])

    def allowed(self, url: str) -> bool:
        path = _path_of(url)
        if path == "/robots.txt":  # RFC 9309 §2.2.2: implicitly allowed
            return True
        rule = self._first_match(path)
        return rule is None or rule.allow

    def explain(self, url: str) -> Verdict:
        path = _path_of(url)
        rule = None if path == "/robots.txt" else self._first_match(path)
        if rule is None:
            return Verdict(True, None, None, self.group)
        return Verdict(rule.allow, rule.text, rule.line, self.group)

    def _first_match(self, path: str) -> _Rule | None:
        if not path.startswith(self._heads):
            return None  # one C call settles the common case: no rule applies
        for head, kind, rule in self._rules:
            if path.startswith(head) and (
                kind == _PREFIX
                or (len(path) == len(head) if kind == _EXACT else _glob_tail_matches(path, rule))
            ):
                return rule
        return None

    def __repr__(self) -> str:
        return (
            f"Rules(group={self.group!r}, rules={len(self._rules)}, "
            f"crawl_delay={self.crawl_delay!r}, sitemaps={len(self.sitemaps)})"
        )


def allow_all() -> Rules:
    return Rules.allow_all()


def disallow_all() -> Rules:
    return Rules.disallow_all()


# --- parsing -----------------------------------------------------------------


class _Group:
    """One run of user-agent lines and the lines that follow it."""

    __slots__ = ("agents", "specific", "universal", "rules", "delays")

    def __init__(self) -> None:
        self.agents: list[str] = []
        self.specific = False  # names our product token
        self.universal = False  # names "*"
        self.rules: list[tuple[bool, str, int]] = []  # (allow, value, line)
        self.delays: list[str] = []


def parse(body: bytes | str, user_agent: str) -> Rules:
    """Parse a robots.txt body and keep the group that applies to ``user_agent``.

    ``user_agent`` may be a bare product token or a full User-Agent string.
    """
    token = user_agent_token(user_agent)
    groups: list[_Group] = []
    sitemaps: dict[str, None] = {}  # ordered set: duplicates dropped
    current: _Group | None = None
    in_agent_run = False
    for line_no, kind, value in _records(_limit(body)):
        if kind == _USER_AGENT:
            if current is None or not in_agent_run:
                current = _Group()
                groups.append(current)
            _add_agent(current, value, token)
            in_agent_run = True
            continue
        in_agent_run = False
        if kind == _SITEMAP:  # RFC 9309 §2.2.4: not part of any group
            if value:
                sitemaps[value] = None
        elif current is None:
            continue  # RFC 9309 §2.2.2: rules outside any group are ignored
        elif kind in (_ALLOW, _DISALLOW):
            current.rules.append((kind == _ALLOW, value, line_no))
        elif kind == _CRAWL_DELAY:
            current.delays.append(value)
    return _build(groups, [_printable(s) for s in sitemaps])


def _add_agent(group: _Group, value: str, token: str) -> None:
    group.agents.append(value)
    # Google: "*" alone or followed by whitespace is the universal group.
    if value[:1] == "*" and (len(value) == 1 or value[1] in _WS):
        group.universal = True
    elif token and product_name(value).lower() == token:
        group.specific = True  # RFC 9309 §2.2.1: the whole token, not a substring


def _build(groups: list[_Group], sitemaps: list[str]) -> Rules:
    # RFC 9309 §2.2.1: merge every group naming us; else every "*" group.
    chosen = [g for g in groups if g.specific] or [g for g in groups if g.universal]
    if not chosen:
        return Rules(sitemaps=sitemaps)
    rules = [
        _compile(allow, value, line)
        for group in chosen
        for allow, value, line in group.rules
        if value  # an empty Allow/Disallow matches nothing
    ]
    agents = dict.fromkeys(_printable(a) for g in chosen for a in g.agents)
    delays = (d for g in chosen for d in g.delays)
    return Rules(rules, _first_delay(delays), sitemaps, ", ".join(agents))


def _first_delay(values: Iterator[str]) -> float | None:
    for value in values:
        try:
            delay_s = float(value)
        except ValueError:
            continue
        if math.isfinite(delay_s) and delay_s >= 0:
            return delay_s
    return None


def _limit(body: bytes | str) -> bytes:
    """Bytes to parse: BOM dropped, cut to MAX_ROBOTS_BYTES at a line end (§2.5)."""
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom) :]
            break
    if len(body) > MAX_ROBOTS_BYTES:
        # A line cut in half could turn "Allow: /a/b" into a broader "Allow: /a".
        end = max(body.rfind(b"\n", 0, MAX_ROBOTS_BYTES), body.rfind(b"\r", 0, MAX_ROBOTS_BYTES))
        body = body[: end + 1]
    return body


def _records(body: bytes) -> Iterator[tuple[int, int, str]]:
    """(line number, key kind, value) for every line with a key.

    bytes.splitlines() splits on CR, LF and CRLF only (RFC 9309 §2.2: NL).
    """
    for line_no, raw in enumerate(body.splitlines(), 1):
        text = raw[:MAX_LINE_BYTES].decode("utf-8", "surrogateescape")
        pair = _key_value(text)
        if pair is not None:
            yield line_no, _key_kind(pair[0]), pair[1]


def _key_value(text: str) -> tuple[str, str] | None:
    text = text.partition("#")[0].strip(_WS)  # RFC 9309 §2.2.3: "#" starts a comment
    key, colon, value = text.partition(":")
    if not colon:
        # Google: "disallow /x" (two words, no colon) is read as "disallow: /x".
        words = text.replace("\t", " ").split(" ")
        words = [w for w in words if w]
        if len(words) != 2:
            return None
        key, value = words
    key = key.strip(_WS)
    return (key, value.strip(_WS)) if key else None


def _key_kind(key: str) -> int:
    key = key.lower()
    for prefix, kind in _KEY_PREFIXES:
        if key.startswith(prefix):
            return kind
    return _UNKNOWN


# --- matching ----------------------------------------------------------------


def _compile(allow: bool, value: str, line: int | None) -> _Rule:
    """One Allow/Disallow value → a rule that matches normalised paths."""
    text = f"{'Allow' if allow else 'Disallow'}: {_printable(value)}"
    # RFC 9309 §2.2.3: "$" ends the pattern (special only as the last octet),
    # "*" is zero or more of any octet; elsewhere both are literal.
    anchored = value.endswith("$")
    pieces = [_canonical(p) for p in (value[:-1] if anchored else value).split("*")]
    priority = len("*".join(pieces)) + anchored
    if len(pieces) == 1:
        return _Rule(allow, priority, line, text, _EXACT if anchored else _PREFIX, pieces[0])
    if pieces[-1] == "":
        anchored = False  # "...*" or "...*$": the trailing "*" eats the rest
    rest = [p for p in pieces[1:] if p]
    last = rest.pop() if anchored else None
    return _Rule(allow, priority, line, text, _GLOB, pieces[0], tuple(rest), last)


def _glob_tail_matches(path: str, rule: _Rule) -> bool:
    """Match the pieces after the head, each at its left-most place.

    Left-most placement is optimal for patterns whose only operator is "*",
    so this is linear in the path: no back-tracking on hostile patterns.
    """
    pos = len(rule.head)
    for piece in rule.middle:
        pos = path.find(piece, pos)
        if pos < 0:
            return False
        pos += len(piece)
    last = rule.last
    return last is None or (len(path) - len(last) >= pos and path.endswith(last))


def _path_of(url: str) -> str:
    """RFC 9309 §2.2.2: the path and query to match, normalised, "/" if empty."""
    match = _AUTHORITY.match(url)
    path = url[match.end() :] if match else url
    path = path.partition("#")[0]
    if not path.startswith("/"):
        path = "/" + path
    return _canonical(path)


def _canonical(text: str) -> str:
    """The one %-encoded form both URLs and patterns are compared in (§2.2.2).

    A literal "*" or "$" (in a URL, or a "$" inside a pattern) becomes %2A /
    %24, so it equals the %-encoded form a pattern must use for it (§2.2.3).
    """
    if _NOT_CANONICAL.search(text) is None:
        return text  # the common case: nothing to encode or decode
    return _ESCAPE.sub(_escape_one, _octets(text)).decode("ascii")


def _escape_one(match: re.Match[bytes]) -> bytes:
    hex_digits = match.group(1)
    if hex_digits is None:  # an octet that must be encoded (incl. a stray "%")
        return b"%%%02X" % match.group()[0]
    octet = int(hex_digits, 16)
    if octet in _UNRESERVED:  # RFC 9309 §2.2.2: %62 is "b"
        return bytes((octet,))
    return b"%" + hex_digits.upper()


def _octets(text: str) -> bytes:
    try:  # surrogateescape restores the invalid UTF-8 bytes we decoded
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _printable(text: str) -> str:
    """Text fit to print: invalid UTF-8 shown as U+FFFD."""
    return _octets(text).decode("utf-8", "replace")
