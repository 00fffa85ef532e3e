"""``OperatorControls`` over anything that keeps the operators' controls with the
``ControlStore`` methods (jobs/controls.py): ``LocalJobs`` (stores them in the
data directory's registry, then applies them to its jobs at once), or a control
store itself (the crawling processes follow it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Protocol

from trawler.blocklist import Blocked
from trawler.services import PolitenessSettings


class Controlled(Protocol):
    async def block(self, domain: str, reason: str = "") -> Blocked: ...

    async def unblock(self, domain: str) -> bool: ...

    async def blocklist(self) -> list[Blocked]: ...

    async def politeness(self) -> PolitenessSettings: ...

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings: ...


class StoredControls:
    """The API's ``OperatorControls`` (api/deps.py) in the records' own words."""

    def __init__(self, controls: Controlled) -> None:
        self.controls = controls

    async def blocklist(self) -> list[dict]:
        return [asdict(entry) for entry in await self.controls.blocklist()]

    async def block(self, domain: str, reason: str) -> dict:
        return asdict(await self.controls.block(domain, reason))

    async def unblock(self, domain: str) -> bool:
        return await self.controls.unblock(domain)

    async def politeness(self) -> dict:
        return _politeness(await self.controls.politeness())

    async def set_politeness(
        self, delay: float | None, max_crawl_delay: float | None, concurrency: int | None
    ) -> dict:
        settings = PolitenessSettings(delay, max_crawl_delay, concurrency)
        return _politeness(await self.controls.set_politeness(settings))


def _politeness(settings: PolitenessSettings) -> dict:
    return {"delay": settings.delay_s, "max_crawl_delay": settings.max_crawl_delay_s,
            "concurrency": settings.concurrency}  # fmt: skip
