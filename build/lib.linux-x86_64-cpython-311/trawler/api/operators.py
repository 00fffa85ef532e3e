"""``OperatorControls`` (api/deps.py) over anything with the ``ControlStore`` methods
(jobs/controls.py): ``LocalJobs`` (stores the controls in the data directory's
registry, then applies them to its jobs at once), or a control store itself
(``PostgresControlStore``: every `trawler worker` follows it within 2 s). A store
that cannot be reached is a 503."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable
from dataclasses import asdict
from typing import Protocol, TypeVar

import psycopg

from trawler.api.deps import StoreUnavailable
from trawler.blocklist import Blocked
from trawler.services import PolitenessSettings

T = TypeVar("T")
# A store that is down or busy (psycopg's PoolTimeout is an OperationalError).
_DOWN = (psycopg.OperationalError, psycopg.InterfaceError, sqlite3.OperationalError, OSError)


class Controlled(Protocol):
    async def block(self, domain: str, reason: str = "") -> Blocked: ...

    async def unblock(self, domain: str) -> bool: ...

    async def blocklist(self) -> list[Blocked]: ...

    async def politeness(self) -> PolitenessSettings: ...

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings: ...


class StoredControls:
    """The API's ``OperatorControls`` in the records' own words."""

    def __init__(self, controls: Controlled) -> None:
        self.controls = controls

    async def blocklist(self) -> list[dict]:
        return [asdict(entry) for entry in await _call(self.controls.blocklist())]

    async def block(self, domain: str, reason: str) -> dict:
        return asdict(await _call(self.controls.block(domain, reason)))

    async def unblock(self, domain: str) -> bool:
        return await _call(self.controls.unblock(domain))

    async def politeness(self) -> dict:
        return _politeness(await _call(self.controls.politeness()))

    async def set_politeness(
        self, delay: float | None, max_crawl_delay: float | None, concurrency: int | None
    ) -> dict:
        settings = PolitenessSettings(delay, max_crawl_delay, concurrency)
        return _politeness(await _call(self.controls.set_politeness(settings)))


def _politeness(settings: PolitenessSettings) -> dict:
    return {"delay": settings.delay_s, "max_crawl_delay": settings.max_crawl_delay_s,
            "concurrency": settings.concurrency}  # fmt: skip


async def _call(call: Awaitable[T]) -> T:
    try:
        return await call
    except _DOWN as exc:
        text = " ".join(str(exc).split())
        raise StoreUnavailable(f"cannot reach the control store: {text}") from None
