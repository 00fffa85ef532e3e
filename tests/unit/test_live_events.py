"""``LiveEvents`` on its own: a listener that reads nothing loses old events and
holds up nobody; every listener is sent the same events from one producer."""

from __future__ import annotations

import asyncio

from trawler.api.deps import StoreUnavailable
from trawler.api.live import Event, LiveEvents


class Counter:
    """Events numbered as made; the store fails while ``down``."""

    def __init__(self) -> None:
        self.made = 0
        self.down = False

    async def __call__(self) -> Event:
        if self.down:
            raise StoreUnavailable("cannot reach the store:\n  refused")
        self.made += 1
        return Event("snapshot", str(self.made))


async def test_a_slow_listener_loses_old_events_and_holds_up_nobody() -> None:
    counter = Counter()
    live = LiveEvents(counter, interval_s=0.01, queue_events=3)
    fast, slow = live.stream(), live.stream()
    got = [await anext(fast)]
    await anext(slow)  # it listens, then reads nothing for a while
    for _ in range(40):  # bounded: 40 events at 0.01 s
        got.append(await asyncio.wait_for(anext(fast), 2))
    numbers = [int(chunk.decode().split("data: ")[1]) for chunk in got]
    assert numbers == list(range(numbers[0], numbers[0] + 41)), "the fast one got every event"
    late = [int((await anext(slow)).decode().split("data: ")[1]) for _ in range(3)]
    assert late[0] > numbers[0] + 30, "the slow one kept only the newest events"
    assert live.listeners == 2 and counter.made < 60
    await fast.aclose()
    await slow.aclose()
    assert live.listeners == 0 and not live.producing


async def test_an_outage_is_a_one_line_problem_and_the_stream_goes_on() -> None:
    counter = Counter()
    live = LiveEvents(counter, interval_s=0.01)
    events = live.stream()
    assert (await anext(events)).startswith(b"event: snapshot\ndata: 1\n\n")
    counter.down = True
    seen = [await asyncio.wait_for(anext(events), 2) for _ in range(8)]
    assert b'event: problem\ndata: {"detail": "cannot reach the store: refused"}\n\n' in seen
    counter.down = False
    seen = [await asyncio.wait_for(anext(events), 2) for _ in range(8)]
    assert seen[-1].startswith(b"event: snapshot\n")
    await events.aclose()


async def test_close_ends_every_stream() -> None:
    live = LiveEvents(Counter(), interval_s=0.01)
    events = live.stream()
    await anext(events)
    live.close()
    left = [chunk async for chunk in events]  # ends: bounded by the queue's size
    assert len(left) <= 4 and live.listeners == 0 and not live.producing


async def test_a_slow_snapshot_is_followed_by_as_long_a_rest() -> None:
    """A snapshot taking 0.05 s at an interval of 0.01 s: one every 0.1 s at most, so
    the producer reads at most half the time."""

    async def slow() -> Event:
        await asyncio.sleep(0.05)
        return Event("snapshot", "{}")

    live = LiveEvents(slow, interval_s=0.01)
    events = live.stream()
    await anext(events)
    started = asyncio.get_running_loop().time()
    for _ in range(5):
        await asyncio.wait_for(anext(events), 2)
    assert asyncio.get_running_loop().time() - started >= 0.45
    await events.aclose()
