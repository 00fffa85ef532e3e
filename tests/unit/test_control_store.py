"""The control store contract (jobs/controls.py), one suite for every backend: the
operators' blocklist and politeness, stored so that every crawling process obeys
them, and ``follow_controls`` applying them to a process's ``Services``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from trawler.jobs.controls import ControlStore, follow_controls
from trawler.jobs.embedded_controls import EmbeddedControlStore
from trawler.services import PolitenessSettings, Services


@pytest.fixture(params=["embedded", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ControlStore]:
    if request.param == "embedded":
        yield EmbeddedControlStore(tmp_path / "data")
        return
    from trawler.jobs.postgres_controls import PostgresControlStore
    from trawler.store.postgres import PostgresStore

    pg = await PostgresStore.connect(request.getfixturevalue("fresh_postgres_url"))
    try:
        yield PostgresControlStore(pg)
    finally:
        await pg.close()


async def test_a_new_store_blocks_nothing_and_sets_nothing(store: ControlStore) -> None:
    assert await store.blocklist() == []
    assert await store.politeness() == PolitenessSettings()
    state = await store.state()
    assert state.blocklist == () and state.politeness == PolitenessSettings()


async def test_block_unblock_in_canonical_form(store: ControlStore) -> None:
    entry = await store.block("*.Spam.Example.", "link farm")
    assert (entry.domain, entry.reason) == ("spam.example", "link farm")
    await store.block("b.example")
    assert [e.domain for e in await store.blocklist()] == ["b.example", "spam.example"]
    again = await store.block("spam.example", "new reason")
    assert [e.reason for e in await store.blocklist() if e.domain == "spam.example"] == [
        again.reason
    ]
    assert await store.unblock("SPAM.example") is True
    assert await store.unblock("spam.example") is False
    assert [e.domain for e in await store.blocklist()] == ["b.example"]
    with pytest.raises(ValueError, match="not a domain"):
        await store.block("not a domain")


async def test_politeness_round_trips(store: ControlStore) -> None:
    wanted = PolitenessSettings(delay_s=0.25, max_crawl_delay_s=None, concurrency=7)
    assert await store.set_politeness(wanted) == wanted
    assert await store.politeness() == wanted
    assert (await store.state()).politeness == wanted
    await store.set_politeness(PolitenessSettings())
    assert await store.politeness() == PolitenessSettings()


async def test_version_moves_on_every_change_and_only_then(store: ControlStore) -> None:
    versions = [await store.version()]
    await store.block("a.example")
    versions.append(await store.version())
    await store.unblock("nothing-here.example")  # no change
    versions.append(await store.version())
    await store.set_politeness(PolitenessSettings(delay_s=1.0))
    versions.append(await store.version())
    await store.unblock("a.example")
    versions.append(await store.version())
    assert versions[1] != versions[0] and versions[2] == versions[1]
    assert len(set(versions)) == 4
    assert (await store.state()).version == versions[-1]


async def test_follow_controls_applies_changes_to_services(store: ControlStore) -> None:
    services = Services(parse_processes=0)
    applied: list[PolitenessSettings] = []
    following = asyncio.create_task(
        follow_controls(store, services, applied.append, interval_s=0.05)
    )
    try:
        await store.block("blocked.example", "spam")
        settings = PolitenessSettings(delay_s=2.0, concurrency=3)
        await store.set_politeness(settings)
        for _ in range(100):  # bounded: 5 s at most
            if services.blocklist.blocks("www.blocked.example:80") and applied:
                break
            await asyncio.sleep(0.05)
        assert services.blocklist.blocks("www.blocked.example:80")
        assert services.politeness == settings and applied[-1] == settings
        await store.unblock("blocked.example")
        for _ in range(100):
            if not services.blocklist.blocks("www.blocked.example:80"):
                break
            await asyncio.sleep(0.05)
        assert not services.blocklist.blocks("www.blocked.example:80")
        assert not services.blocklist.active
    finally:
        following.cancel()
        await services.close()
