"""Operators' process-wide controls, stored so that every process crawling obeys them.

An operator blocks domains and tunes politeness through the API; the settings
live in the backend's control store (embedded: the registry ``DATA/jobs.db``;
distributed: PostgreSQL) so that they survive a restart and so that every
process crawling — the serve process's job runner, `trawler crawl` on the same
data directory, every `trawler worker` — applies them. A crawling process reads
``version()`` every ``FOLLOW_CONTROLS_S`` and, when it moved, the whole state,
and applies it to its ``Services`` (``apply_controls``): well inside the 2 s the
service promises.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from trawler.blocklist import Blocked
from trawler.services import PolitenessSettings, Services

log = logging.getLogger("trawler")
FOLLOW_CONTROLS_S = 0.5


@dataclass(slots=True, frozen=True)
class ControlState:
    """Everything an operator set, as one value read in one transaction."""

    version: int  # moves on every change: a follower re-reads only when it moved
    blocklist: tuple[Blocked, ...]
    politeness: PolitenessSettings


class ControlStore(Protocol):
    """One class per backend, with one contract suite run against both."""

    async def block(self, domain: str, reason: str = "") -> Blocked:
        """Add (or re-add with a new reason) a domain; ValueError for a name that
        is not a domain (blocklist.blocklist_domain)."""

    async def unblock(self, domain: str) -> bool:
        """False when ``domain`` was not blocked."""

    async def blocklist(self) -> builtins.list[Blocked]:
        """Entries ordered by domain."""

    async def politeness(self) -> PolitenessSettings: ...

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings: ...

    async def version(self) -> int:
        """A number that changes whenever anything here changes (cheap to read)."""

    async def state(self) -> ControlState: ...


def apply_controls(state: ControlState, services: Services) -> None:
    """Make ``services`` follow ``state``. The crawlers of the process see the new
    blocklist at once (they share it); politeness still has to reach each crawler
    (``Crawler.apply_politeness``): ``sync_controls`` does both."""
    blocklist = services.blocklist
    wanted = {entry.domain: entry for entry in state.blocklist}
    current = {entry.domain: entry for entry in blocklist.entries()}
    for domain in current.keys() - wanted.keys():
        blocklist.remove(domain)
    for domain, entry in wanted.items():
        if current.get(domain) != entry:
            blocklist.put(entry)
    if services.politeness != state.politeness:
        services.politeness = state.politeness
        services.throttle.resize(state.politeness.concurrency)
        services.hosts.forget_times()


async def sync_controls(
    store: ControlStore,
    services: Services,
    apply_politeness: Callable[[PolitenessSettings], None],
) -> int:
    """Read ``store`` once and apply it: to ``services``, and new politeness to the
    process's crawlers through ``apply_politeness``. Returns the version read."""
    state = await store.state()
    before = services.politeness
    apply_controls(state, services)
    if state.politeness != before:
        apply_politeness(state.politeness)
    return state.version


async def follow_controls(
    store: ControlStore,
    services: Services,
    apply_politeness: Callable[[PolitenessSettings], None],
    interval_s: float = FOLLOW_CONTROLS_S,
) -> None:
    """Keep ``services`` following ``store`` until cancelled: the state at once, then
    every change within ``interval_s``. ``apply_politeness`` hands new politeness
    to the process's crawlers (``Crawler.apply_politeness`` of each). A store that
    cannot be read for a while changes nothing: the crawl goes on as it was."""
    seen: int | None = None
    while True:
        try:
            if seen is None or await store.version() != seen:
                seen = await sync_controls(store, services, apply_politeness)
        except Exception as exc:  # a busy or unreachable store: try again next time
            log.debug("cannot read the operators' controls: %s", exc)
        await asyncio.sleep(interval_s)
