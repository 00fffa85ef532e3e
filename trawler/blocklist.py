"""Domains no job may fetch from, changed live by an operator. Pure: no I/O.

A blocked domain covers its subdomains (``example.com`` blocks
``www.example.com``); an IP address covers itself only. The check takes a host
key (``host[:port]``, urls.host_key) and is cached per host, so the crawl loop
pays one dict lookup per URL while the list is not empty and a truth test while
it is. The engine applies it to every URL before its request (queued URLs are
skipped with the reason ``blocklist`` as they come up, without a request) and
to every new link.
"""

from __future__ import annotations

import ipaddress
import re
import time
from dataclasses import dataclass

_LABELS = re.compile(
    r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
_CACHE_MAX = 100_000


@dataclass(slots=True, frozen=True)
class Blocked:
    domain: str
    reason: str
    added_at: float  # Unix time


def blocklist_domain(text: str) -> str:
    """The canonical form of a domain or IP address to block, or ValueError (one line)."""
    domain = text.strip().lower().removeprefix("*.").strip(".")
    if domain.startswith("[") and domain.endswith("]"):
        domain = domain[1:-1]
    try:
        ip = ipaddress.ip_address(domain)
        return f"[{ip}]" if ip.version == 6 else str(ip)
    except ValueError:
        pass
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{text!r} is not a domain name") from None
    if len(domain) > 253 or _LABELS.fullmatch(domain) is None:
        raise ValueError(f"{text!r} is not a domain name")
    return domain


def _host_name(host_key: str) -> str:
    """``host[:port]`` → host (IPv6 in brackets)."""
    if host_key.startswith("["):
        return host_key[: host_key.index("]") + 1]
    return host_key.rsplit(":", 1)[0] if ":" in host_key else host_key


class Blocklist:
    def __init__(self) -> None:
        self.active = False  # anything blocked: the engine's one check while it is empty
        self._domains: dict[str, Blocked] = {}
        self._verdicts: dict[str, bool] = {}  # host key -> blocked, since the last change
        self.generation = 0  # counts the changes (knownlinks.py)

    def add(self, domain: str, reason: str = "") -> Blocked:
        entry = Blocked(blocklist_domain(domain), reason, time.time())
        self._domains[entry.domain] = entry
        self._changed()
        return entry

    def put(self, entry: Blocked) -> None:
        """An entry as stored elsewhere (its domain already canonical, its time kept)."""
        self._domains[entry.domain] = entry
        self._changed()

    def remove(self, domain: str) -> bool:
        found = self._domains.pop(blocklist_domain(domain), None) is not None
        self._changed()
        return found

    def entries(self) -> list[Blocked]:
        return sorted(self._domains.values(), key=lambda entry: entry.domain)

    def blocks(self, host_key: str) -> bool:
        verdict = self._verdicts.get(host_key)
        if verdict is None:
            if len(self._verdicts) >= _CACHE_MAX:
                self._verdicts.clear()
            verdict = self._verdicts[host_key] = self._match(_host_name(host_key))
        return verdict

    def _match(self, host: str) -> bool:
        if host in self._domains:
            return True
        if host.startswith("[") or host.replace(".", "").isdigit():
            return False  # an address: itself only
        while "." in host:
            host = host.split(".", 1)[1]
            if host in self._domains:
                return True
        return False

    def _changed(self) -> None:
        self.active = bool(self._domains)
        self._verdicts = {}
        self.generation += 1
