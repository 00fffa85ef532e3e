"""The robots.txt product token a crawl goes by (RFC 9309 §2.2.1).

Pure. The token is ``--robots-agent`` when given (validated against
``PRODUCT_TOKEN``), else derived from the User-Agent the way sites expect the
big crawlers' strings to be read: a ``Mozilla/…`` string names its crawler
after ``compatible;`` ("Mozilla/5.0 (compatible; Googlebot/2.1; +…)" is
googlebot, bingbot's likewise); any other string is its first product
("Trawler/0.1 (+https://…)" is trawler). Compared case-insensitively, so the
token is kept lower-cased.
"""

from __future__ import annotations

import re

# RFC 9309 §2.2: "identifier = 1*(%x2D / %x41-5A / %x5F / %x61-7A)": letters, "-", "_".
PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
# A product name: what a User-Agent or a user-agent line writes before its version.
_PRODUCT = re.compile(r"[^\s/*;()]*")
# Crawlers that present as browsers name themselves after "compatible;":
# "Mozilla/5.0 (compatible; bingbot/2.0; +…)",
# "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +…) …".
_COMPATIBLE = re.compile(r"[(;]\s*compatible\s*;\s*([^\s/*;()]+)", re.IGNORECASE)
_WS = " \t\v\f"


def user_agent_token(user_agent: str) -> str:
    """The product token a User-Agent stands for, lower-cased; a bare token stays itself.

    "Mozilla/5.0 (compatible; MyBot/1.0; +https://…)" → "mybot"; a browser's
    string without "compatible;" → "mozilla"; "" → "" (only "*" groups apply).
    """
    value = user_agent.strip(_WS)
    if value[:8].lower() == "mozilla/":
        compatible = _COMPATIBLE.search(value)
        if compatible is not None:
            return compatible.group(1).lower()
    return product_name(value).lower()


def product_name(value: str) -> str:
    """The product a User-Agent or user-agent line names: the text before the first
    whitespace, "/", "*", ";" or parenthesis ("Googlebot/2.1" → "Googlebot")."""
    match = _PRODUCT.match(value)
    return match.group() if match else ""
