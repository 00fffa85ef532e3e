"""Text fit to store, from whatever bytes a server sent. Pure.

Bytes from the network become ``str`` with ``surrogateescape`` (aiohttp
decodes header bytes that way, and so do we, and robots.py its lines): an
undecodable byte such as Latin-1 ``\\xe9`` becomes the lone surrogate
``\\udce9``. Such a str round-trips to the original bytes (the WARC writer
relies on that to keep the HTTP head as sent), but every sink of real text
refuses it: ``str.encode()`` for a WARC header, SQLite, PostgreSQL (which
refuses NUL as well), JSON and CSV exports. A URL or text that would go to
one of them passes through here where it enters a record, so no sink ever
sees one, and no page can fail its commit for its text.
"""

from __future__ import annotations

import re
from urllib.parse import quote

# What no sink takes: NUL (PostgreSQL text) and lone surrogates (UTF-8 itself).
_UNSAFE = re.compile("[\x00\ud800-\udfff]")
# WHATWG URL §1.3 (C0 control percent-encode set, plus space and DEL) and every
# non-ASCII code point: what a browser percent-encodes in a path, query or fragment.
_URL_UNSAFE = re.compile("[\x00-\x20\x7f-\U0010ffff]+")
# The authority keeps its non-ASCII text (an IDN host is spelled in Unicode);
# only what cannot be text, or would break the URL, is encoded there.
_AUTHORITY_UNSAFE = re.compile("[\x00-\x20\x7f\ud800-\udfff]+")
_SCHEME_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\]*")
_PRINTABLE_ASCII = re.compile("[\x21-\x7e]*")
# WHATWG URL §4.4: leading and trailing C0 controls and spaces are stripped,
# tabs and newlines anywhere removed, before anything is encoded.
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def raw_bytes(text: str) -> bytes:
    """The bytes ``text`` was decoded from with ``utf-8``/``surrogateescape``.

    A surrogate that escapes no byte (U+D800..U+DC7F, U+DD00..U+DFFF: it can only
    come from elsewhere) becomes the UTF-8 of U+FFFD.
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return "".join(_escape_or_replace(char) for char in text).encode("utf-8", "surrogateescape")


def _escape_or_replace(char: str) -> str:
    return "\ufffd" if "\ud800" <= char <= "\udfff" and not "\udc80" <= char <= "\udcff" else char


def safe_text(text: str) -> str:
    """``text`` as valid Unicode without NUL: undecodable bytes and NUL become U+FFFD."""
    if _UNSAFE.search(text) is None:
        return text
    return raw_bytes(text).decode("utf-8", "replace").replace("\x00", "\ufffd")


def safe_url(url: str) -> str:
    """``url`` with its undecodable bytes percent-encoded, as browsers do.

    In the path, query and fragment every byte that is a control, space, DEL or
    not ASCII is percent-encoded: a raw ``\\xe9`` byte (a surrogate here) as
    ``%E9``, a valid ``é`` as its UTF-8, ``%C3%A9`` (WHATWG URL §4.4), after
    surrounding spaces and controls are stripped and tabs and newlines dropped. The
    authority keeps valid Unicode for the IDNA step of whoever reads it.
    An existing ``%`` is left alone: the URL may already be encoded.
    """
    if _PRINTABLE_ASCII.fullmatch(url):
        return url  # the common case
    url = url.strip(_C0_AND_SPACE).translate(_TAB_NEWLINE)
    match = _SCHEME_AUTHORITY.match(url)
    split = match.end() if match else 0
    head = _AUTHORITY_UNSAFE.sub(_percent_encode, url[:split])
    return head + _URL_UNSAFE.sub(_percent_encode, url[split:])


def _percent_encode(match: re.Match[str]) -> str:
    return quote(raw_bytes(match.group()), safe="")
