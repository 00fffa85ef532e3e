"""The embedded control store: operators' blocklist and politeness in ``DATA/jobs.db``.

The ``ControlStore`` contract (jobs/controls.py) on the registry's ``blocklist``
and ``settings`` tables (jobs/embedded.py's schema), so that the serve process
and any `trawler crawl` on the same data directory obey the same controls. Each
call opens its own short-lived connection on a thread, as the job store does.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from trawler.blocklist import Blocked, blocklist_domain
from trawler.jobs.controls import ControlState
from trawler.jobs.embedded import open_registry, write_transaction
from trawler.services import PolitenessSettings

T = TypeVar("T")
_VERSION = "control_version"
_FIELDS = ("delay_s", "max_crawl_delay_s", "concurrency")


class EmbeddedControlStore:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            conn = open_registry(self.data_dir)
            try:
                return fn(conn)
            finally:
                conn.close()

        return await asyncio.to_thread(call)

    async def block(self, domain: str, reason: str = "") -> Blocked:
        entry = Blocked(blocklist_domain(domain), reason, time.time())

        def insert(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(
                    "INSERT OR REPLACE INTO blocklist (domain, reason, added_at) VALUES (?, ?, ?)",
                    (entry.domain, entry.reason, entry.added_at),
                )
                _bump(conn)

        await self._run(insert)
        return entry

    async def unblock(self, domain: str) -> bool:
        name = blocklist_domain(domain)

        def delete(conn: sqlite3.Connection) -> bool:
            with write_transaction(conn):
                found = conn.execute("DELETE FROM blocklist WHERE domain = ?", (name,)).rowcount
                if found:
                    _bump(conn)
            return bool(found)

        return await self._run(delete)

    async def blocklist(self) -> builtins.list[Blocked]:
        return await self._run(_select_blocklist)

    async def politeness(self) -> PolitenessSettings:
        return await self._run(_select_politeness)

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings:
        def update(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.executemany(
                    "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)",
                    [(f"politeness.{name}", getattr(settings, name)) for name in _FIELDS],
                )
                _bump(conn)

        await self._run(update)
        return settings

    async def version(self) -> int:
        return await self._run(_select_version)

    async def state(self) -> ControlState:
        def select(conn: sqlite3.Connection) -> ControlState:
            conn.execute("BEGIN")  # one snapshot of all three
            try:
                return ControlState(
                    _select_version(conn),
                    tuple(_select_blocklist(conn)),
                    _select_politeness(conn),
                )
            finally:
                conn.execute("COMMIT")

        return await self._run(select)


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO settings (name, value) VALUES (?, 1)"
        " ON CONFLICT (name) DO UPDATE SET value = value + 1",
        (_VERSION,),
    )


def _select_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM settings WHERE name = ?", (_VERSION,)).fetchone()
    return int(row[0]) if row else 0


def _select_blocklist(conn: sqlite3.Connection) -> list[Blocked]:
    rows = conn.execute("SELECT domain, reason, added_at FROM blocklist ORDER BY domain")
    return [Blocked(domain, reason, added_at) for domain, reason, added_at in rows]


def _select_politeness(conn: sqlite3.Connection) -> PolitenessSettings:
    rows = conn.execute("SELECT name, value FROM settings WHERE name LIKE 'politeness.%'")
    values: dict[str, Any] = {name.removeprefix("politeness."): value for name, value in rows}
    return PolitenessSettings(**{name: values.get(name) for name in _FIELDS})
