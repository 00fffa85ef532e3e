"""The pure parts of the process's services: the blocklist's matching, the throttle
that follows a new size at once, the live politeness settings' bounds."""

from __future__ import annotations

import asyncio

import pytest

from trawler.blocklist import Blocklist, blocklist_domain
from trawler.politeness import HostSlot, PolitenessPolicy
from trawler.services import PolitenessSettings
from trawler.throttle import Throttle


def test_a_domain_blocks_itself_and_its_subdomains_on_any_port() -> None:
    blocklist = Blocklist()
    assert not blocklist.active
    blocklist.add("Example.COM.", "complaint")
    assert blocklist.active
    assert blocklist.blocks("example.com")
    assert blocklist.blocks("www.example.com:8080")
    assert not blocklist.blocks("notexample.com")
    assert not blocklist.blocks("example.com.au")


def test_an_address_blocks_itself_only() -> None:
    blocklist = Blocklist()
    blocklist.add("127.0.1.2")
    blocklist.add("[::1]")
    assert blocklist.blocks("127.0.1.2:8800")
    assert not blocklist.blocks("127.0.1.20:8800")
    assert not blocklist.blocks("1.127.0.1.2")
    assert blocklist.blocks("[::1]:80")


def test_unblocking_takes_effect_at_once() -> None:
    blocklist = Blocklist()
    blocklist.add("*.example.com")
    assert blocklist.blocks("a.example.com")  # cached
    assert blocklist.remove("example.com")
    assert not blocklist.blocks("a.example.com")
    assert not blocklist.active
    assert not blocklist.remove("example.com")


@pytest.mark.parametrize("text", ["", "exa mple.com", "a..b", "-x.com", "x" * 300, "a/b"])
def test_a_name_that_is_no_domain_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="is not a domain name"):
        blocklist_domain(text)


def test_international_names_are_kept_in_their_ascii_form() -> None:
    assert blocklist_domain("bücher.example") == "xn--bcher-kva.example"


async def test_throttle_follows_a_new_size_at_once() -> None:
    throttle = Throttle(1)
    await throttle.acquire()
    waiting = [asyncio.create_task(throttle.acquire()) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert sum(task.done() for task in waiting) == 0
    throttle.resize(3)
    await asyncio.sleep(0.01)
    assert sum(task.done() for task in waiting) == 2 and throttle.in_use == 3
    throttle.resize(None)
    await asyncio.sleep(0.01)
    assert all(task.done() for task in waiting) and throttle.in_use == 4


async def test_a_cancelled_waiter_gives_its_place_back() -> None:
    throttle = Throttle(1)
    await throttle.acquire()
    waiter = asyncio.create_task(throttle.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    throttle.release()
    await asyncio.sleep(0.01)
    assert throttle.in_use == 0


def test_recompute_lets_a_shorter_delay_apply_at_once() -> None:
    slot = HostSlot("a.test")
    PolitenessPolicy(delay_s=5.0).after_request(slot, 100.0)
    assert slot.next_allowed_at > 105.0
    PolitenessPolicy(delay_s=0.5).recompute(slot)
    assert 100.5 < slot.next_allowed_at < 101.0


@pytest.mark.parametrize(
    "settings", [{"delay_s": -1.0}, {"max_crawl_delay_s": 1e9}, {"concurrency": 0}]
)
def test_politeness_settings_out_of_bounds_are_refused(settings: dict) -> None:
    with pytest.raises(ValueError):
        PolitenessSettings(**settings)
