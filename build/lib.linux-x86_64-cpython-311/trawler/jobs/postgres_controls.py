"""The distributed control store: operators' blocklist and politeness in PostgreSQL.

The ``ControlStore`` contract (jobs/controls.py) on the ``blocklist`` and
``operator_settings`` tables (migration 6, store/pgschema_steps.py), so that the serve
process and every `trawler worker` obey the same controls. Each change bumps
``operator_settings.version`` in its own transaction; ``state`` reads the
version, the settings and the blocklist in one statement, hence one snapshot.
"""

from __future__ import annotations

import builtins
import time
from typing import Any

from trawler.blocklist import Blocked, blocklist_domain
from trawler.jobs.controls import ControlState
from trawler.services import PolitenessSettings
from trawler.store.postgres import PostgresStore

_BUMP = "UPDATE operator_settings SET version = version + 1"
_BLOCKLIST = "SELECT domain, reason, added_at FROM blocklist ORDER BY domain"
_POLITENESS = "SELECT delay_s, max_crawl_delay_s, concurrency FROM operator_settings"
_STATE = (
    "SELECT version, delay_s, max_crawl_delay_s, concurrency,"
    " (SELECT coalesce(json_agg(json_build_array(domain, reason, added_at) ORDER BY domain),"
    "  '[]'::json) FROM blocklist)"
    " FROM operator_settings"
)


class PostgresControlStore:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    async def block(self, domain: str, reason: str = "") -> Blocked:
        entry = Blocked(blocklist_domain(domain), reason, time.time())

        async def insert() -> None:
            async with self.store.pool.connection() as conn, conn.transaction():
                await conn.execute(
                    "INSERT INTO blocklist (domain, reason, added_at) VALUES (%s, %s, %s)"
                    " ON CONFLICT (domain) DO UPDATE"
                    " SET reason = excluded.reason, added_at = excluded.added_at",
                    (entry.domain, entry.reason, entry.added_at),
                )
                await conn.execute(_BUMP)

        await self.store._call(insert)
        return entry

    async def unblock(self, domain: str) -> bool:
        name = blocklist_domain(domain)

        async def delete() -> bool:
            async with self.store.pool.connection() as conn, conn.transaction():
                cur = await conn.execute("DELETE FROM blocklist WHERE domain = %s", (name,))
                if cur.rowcount:
                    await conn.execute(_BUMP)
                return bool(cur.rowcount)

        return await self.store._call(delete)

    async def blocklist(self) -> builtins.list[Blocked]:
        rows = await self._fetchall(_BLOCKLIST)
        return [Blocked(domain, reason, added_at) for domain, reason, added_at in rows]

    async def politeness(self) -> PolitenessSettings:
        return _politeness(*(await self._fetchall(_POLITENESS))[0])

    async def set_politeness(self, settings: PolitenessSettings) -> PolitenessSettings:
        async def update() -> None:
            async with self.store.pool.connection() as conn:
                await conn.execute(
                    "UPDATE operator_settings SET version = version + 1,"
                    " delay_s = %s, max_crawl_delay_s = %s, concurrency = %s",
                    (settings.delay_s, settings.max_crawl_delay_s, settings.concurrency),
                )

        await self.store._call(update)
        return settings

    async def version(self) -> int:
        return int((await self._fetchall("SELECT version FROM operator_settings"))[0][0])

    async def state(self) -> ControlState:
        version, delay_s, max_crawl_delay_s, concurrency, entries = (await self._fetchall(_STATE))[
            0
        ]
        return ControlState(
            int(version),
            tuple(Blocked(domain, reason, float(added_at)) for domain, reason, added_at in entries),
            _politeness(delay_s, max_crawl_delay_s, concurrency),
        )

    async def _fetchall(self, sql: str) -> builtins.list[Any]:
        async def select() -> builtins.list[Any]:
            async with self.store.pool.connection() as conn:
                return await (await conn.execute(sql)).fetchall()

        return await self.store._call(select)


def _politeness(delay_s: Any, max_crawl_delay_s: Any, concurrency: Any) -> PolitenessSettings:
    return PolitenessSettings(delay_s, max_crawl_delay_s, concurrency)
