"""``OperatorControls`` over a ``ControlStore`` (jobs/controls.py): the API writes the
operators' blocklist and politeness where every crawling process reads them (the
distributed server: PostgreSQL, followed by every `trawler worker` within 2 s).
A store that cannot be reached is a 503."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import asdict
from typing import TypeVar

import psycopg

from trawler.api.deps import StoreUnavailable
from trawler.jobs.controls import ControlStore
from trawler.services import PolitenessSettings

T = TypeVar("T")
_DOWN = (psycopg.OperationalError, psycopg.InterfaceError, OSError)  # PoolTimeout included


class StoredControls:
    def __init__(self, store: ControlStore) -> None:
        self.store = store

    async def blocklist(self) -> list[dict]:
        return [asdict(entry) for entry in await _call(self.store.blocklist())]

    async def block(self, domain: str, reason: str) -> dict:
        return asdict(await _call(self.store.block(domain, reason)))

    async def unblock(self, domain: str) -> bool:
        return await _call(self.store.unblock(domain))

    async def politeness(self) -> dict:
        return _view(await _call(self.store.politeness()))

    async def set_politeness(
        self, delay: float | None, max_crawl_delay: float | None, concurrency: int | None
    ) -> dict:
        settings = PolitenessSettings(delay, max_crawl_delay, concurrency)
        return _view(await _call(self.store.set_politeness(settings)))


def _view(settings: PolitenessSettings) -> dict:
    return {"delay": settings.delay_s, "max_crawl_delay": settings.max_crawl_delay_s,
            "concurrency": settings.concurrency}  # fmt: skip


async def _call(call: Awaitable[T]) -> T:
    try:
        return await call
    except _DOWN as exc:
        text = " ".join(str(exc).split())
        raise StoreUnavailable(f"cannot reach the control store: {text}") from None
