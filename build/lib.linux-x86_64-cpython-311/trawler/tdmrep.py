"""Reuse reservations: what a site says about text and data mining of its pages. Pure.

W3C TDM Reservation Protocol (TDMRep, Community Group final report, 2024-05-10)
gives three places for the same two properties, ``tdm-reservation`` (1: TDM rights
reserved, 0: not reserved) and ``tdm-policy`` (the URL of a policy saying how to
license them):

- the ``tdm-reservation`` / ``tdm-policy`` HTTP response headers of a resource;
- ``<meta name="tdm-reservation" content="1">`` / ``<meta name="tdm-policy">`` in
  an HTML document (read by parse.py);
- ``/.well-known/tdmrep.json`` on the origin: a JSON array of rules, each
  ``{"location": pattern, "tdm-reservation": 0|1, "tdm-policy": url}``; the
  pattern matches resource paths as robots.txt paths do (``*`` any run of
  characters, a final ``$`` the end). The first rule that matches applies.

A page's effective reservation comes from the most specific statement found:
its own document (meta), then its response (headers), then the origin's file.
``source`` says which (``SOURCE_*``); no statement anywhere: all three None.

Separately, and for the host: which robots.txt groups name AI crawlers
(``AI_AGENTS``), and which of those are disallowed from ``/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from trawler import robots
from trawler.robotsagent import product_name

TDMREP_PATH = "/.well-known/tdmrep.json"
SOURCE_HEADER, SOURCE_META, SOURCE_FILE = "header", "meta", "tdmrep.json"
# tdmrep.json fetches are kept with robots.txt's (tdmgate.py), under the fetch profile
# plus this suffix: readers of kept robots.txt files leave them out.
KEPT_PROFILE_SUFFIX = ":tdmrep"
# A well-formed file has a few rules; more is not a policy file (a cap on the work).
MAX_RULES = 10_000

# Product tokens of crawlers that gather text for AI models, as their operators
# document them for robots.txt. The one list Trawler keeps: add a token here.
AI_AGENTS: tuple[str, ...] = (
    "GPTBot",  # OpenAI, training
    "ChatGPT-User",  # OpenAI, fetches for a user's question
    "OAI-SearchBot",  # OpenAI, search
    "Google-Extended",  # Google, Gemini training (a token only: Googlebot fetches)
    "Applebot-Extended",  # Apple, training (a token only: Applebot fetches)
    "CCBot",  # Common Crawl, whose corpus trains most models
    "ClaudeBot",  # Anthropic, training
    "Claude-User",  # Anthropic, fetches for a user
    "Claude-SearchBot",  # Anthropic, search
    "anthropic-ai",  # Anthropic, older token
    "PerplexityBot",  # Perplexity, search
    "Perplexity-User",  # Perplexity, fetches for a user
    "Bytespider",  # ByteDance
    "Meta-ExternalAgent",  # Meta, training
    "Meta-ExternalFetcher",  # Meta, fetches for a user
    "FacebookBot",  # Meta, speech recognition training
    "cohere-ai",  # Cohere
    "cohere-training-data-crawler",  # Cohere, training
    "Amazonbot",  # Amazon
    "DuckAssistBot",  # DuckDuckGo, AI answers
    "MistralAI-User",  # Mistral, fetches for a user
    "Diffbot",  # Diffbot, knowledge graph
    "AI2Bot",  # Allen Institute for AI
    "Timpibot",  # Timpi
    "omgili",  # Webz.io, data sold for training
)
_AI_LOWER = tuple(token.lower() for token in AI_AGENTS)


class TdmRepError(ValueError):
    """A tdmrep.json that is not one; the message is one line."""


@dataclass(slots=True, frozen=True)
class TdmRule:
    location: str
    reserved: bool
    policy: str | None
    pattern: re.Pattern[str]


@dataclass(slots=True, frozen=True)
class Reservation:
    reserved: bool | None = None
    policy: str | None = None
    source: str | None = None  # SOURCE_META, SOURCE_HEADER, SOURCE_FILE; None: no statement


NONE = Reservation()


def parse_tdmrep(body: bytes) -> tuple[TdmRule, ...]:
    """The rules of a tdmrep.json body, in order; ``TdmRepError`` when malformed."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TdmRepError(f"not JSON ({' '.join(str(exc).split())})") from None
    if not isinstance(data, list):
        raise TdmRepError("not a JSON array of rules")
    if len(data) > MAX_RULES:
        raise TdmRepError(f"more than {MAX_RULES} rules")
    return tuple(_rule(item, index) for index, item in enumerate(data))


def _rule(item: object, index: int) -> TdmRule:
    if not isinstance(item, dict):
        raise TdmRepError(f"rule {index} is not an object")
    location, reserved, policy = item.get("location"), item.get("tdm-reservation"), None
    if not isinstance(location, str) or not location.startswith(("/", "*")):
        raise TdmRepError(f"rule {index}: location must be a path pattern")
    if reserved not in (0, 1) or isinstance(reserved, float):
        raise TdmRepError(f"rule {index}: tdm-reservation must be 0 or 1")
    if "tdm-policy" in item:
        policy = item["tdm-policy"]
        if not isinstance(policy, str):
            raise TdmRepError(f"rule {index}: tdm-policy must be a URL")
    return TdmRule(location, bool(reserved), policy, _compile(location))


def _compile(location: str) -> re.Pattern[str]:
    """robots.txt path syntax (RFC 9309 §2.2.3): ``*`` any run, a final ``$`` the end."""
    anchored = location.endswith("$")
    pieces = (location[:-1] if anchored else location).split("*")
    return re.compile(".*".join(map(re.escape, pieces)) + ("$" if anchored else ""), re.DOTALL)


def file_reservation(rules: tuple[TdmRule, ...], url: str) -> Reservation:
    """What the origin's rules say of ``url``: the first rule matching its path."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    for rule in rules:
        if rule.pattern.match(path):
            return Reservation(rule.reserved, rule.policy, SOURCE_FILE)
    return NONE


def _flag(value: str | None) -> bool | None:
    value = value.strip() if value is not None else None
    return True if value == "1" else False if value == "0" else None


def header_reservation(headers: list[tuple[str, str]]) -> Reservation:
    """The ``tdm-reservation`` / ``tdm-policy`` response headers; a value other than
    0 or 1 states nothing."""
    reservation = policy = None
    for name, value in headers:
        if len(name) in (10, 15) and name[:4].lower() == "tdm-":  # cheap reject first
            lowered = name.lower()
            if lowered == "tdm-reservation" and reservation is None:
                reservation = value
            elif lowered == "tdm-policy" and policy is None:
                policy = value.strip() or None
    return _statement(_flag(reservation), policy, SOURCE_HEADER)


def meta_reservation(reservation: str | None, policy: str | None) -> Reservation:
    """The ``<meta name="tdm-reservation">`` / ``<meta name="tdm-policy">`` contents."""
    return _statement(_flag(reservation), (policy or "").strip() or None, SOURCE_META)


def _statement(reserved: bool | None, policy: str | None, source: str) -> Reservation:
    if reserved is None:  # a policy alone reserves nothing: TDMRep pairs it with 1
        return NONE
    return Reservation(reserved, policy if reserved else None, source)


@dataclass(slots=True, frozen=True)
class AiGroups:
    """The AI crawlers a robots.txt has a group for (``named``), and those of them
    disallowed from ``/`` (``disallowed``), each in ``AI_AGENTS`` order."""

    named: tuple[str, ...] = ()
    disallowed: tuple[str, ...] = ()


NO_GROUPS = AiGroups()


def ai_groups(body: bytes) -> AiGroups:
    """Which AI crawlers a robots.txt body names in a ``User-agent`` line. Most files
    name none: one substring search each settles that without parsing."""
    lowered = body.lower().decode("utf-8", "replace")
    named, disallowed = [], []
    for token, lower in zip(AI_AGENTS, _AI_LOWER, strict=True):
        if lower not in lowered:
            continue
        rules = robots.parse(body, lower)
        # The group chosen for the token names it (not only "*": RFC 9309 §2.2.1).
        agents = {product_name(a.strip()).lower() for a in (rules.group or "").split(",")}
        if lower in agents:
            named.append(token)
            if not rules.allowed("http://h/"):
                disallowed.append(token)
    return AiGroups(tuple(named), tuple(disallowed)) if named else NO_GROUPS
