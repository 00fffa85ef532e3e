"""The hosts one worker holds in the Redis frontier, and their politeness state.

A host is held from the script that hands it out (NEXT, or ACQUIRE for a
robots.txt fetch) to ``finish_host`` (FINISH), so one worker at a time sends it
requests. While it is held, its politeness state lives in a local ``HostSlot``:
``record_sent``, ``record_response`` and ``set_crawl_delay`` are synchronous, no
Redis call on a page's path, and ``finish_host`` writes the slot back to the
host's hash (``trawler:host:{<host>}``, redis.py's key layout). Its monotonic
times and Redis times convert through the offset ``RedisClock`` measures against
``TIME`` (redis_conn.py).

``HeldHosts`` is a part of ``RedisFrontier`` (redis.py), which builds the state
declared below; its methods are the frontier's own, not a layer in front of them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from trawler.frontier.redis_codec import ms
from trawler.politeness import SPACING_MARGIN_S, HostSlot, PolitenessPolicy

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from trawler.frontier.redis_conn import RedisClock
    from trawler.frontier.redis_keys import KeySpace
    from trawler.frontier.redis_options import RedisFrontierOptions


class HeldHosts:
    """Taking, pacing and giving back the hosts this worker holds (module doc)."""

    # Built by RedisFrontier.__init__ (redis.py).
    redis: Redis
    policy: PolitenessPolicy
    options: RedisFrontierOptions
    keys: KeySpace
    worker_id: str
    _held: dict[str, HostSlot]  # hosts this worker holds
    _crawl_delay_dirty: set[str]  # held hosts whose Crawl-delay FINISH writes back
    _clock: RedisClock
    _wake: asyncio.Event
    _background: set[asyncio.Task[None]]
    # RedisFrontier's script runner and retried call (redis.py), the sweep's
    # forgetting of a bucket (redis_sweep.py).
    _run: Callable[..., Awaitable[Any]]
    _call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]
    _changed: Callable[[str], None]

    async def acquire_host(self, host: str) -> None:
        lease_ms = ms(self.options.lease_timeout_s)
        while True:
            if host not in self._held:
                args: list[str | int] = [self.worker_id, lease_ms, host, *self._gap_args()]
                reply = await self._run("ACQUIRE", args, self.keys.bucket_of(host))
                if reply[0] == 1:
                    self._hold(host, *reply[1:])
                    break
            await asyncio.sleep(0.05)
        await self.wait_host_ready(host)

    def record_sent(self, host: str, sent_at: float) -> None:
        self.policy.after_request(self._local_slot(host), sent_at)

    def record_response(
        self, host: str, status: int | None, error: str | None, retry_after_s: float | None
    ) -> None:
        slot = self._local_slot(host)
        self.policy.after_response(slot, status, error, retry_after_s, time.monotonic())

    def set_crawl_delay(self, host: str, crawl_delay_s: float | None) -> None:
        slot = self._held.get(host)
        if slot is not None:  # written back by finish_host
            self.policy.set_crawl_delay(slot, crawl_delay_s)
            self._crawl_delay_dirty.add(host)
            return
        task = asyncio.get_running_loop().create_task(self._store_crawl_delay(host, crawl_delay_s))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _store_crawl_delay(self, host: str, crawl_delay_s: float | None) -> None:
        value = "" if crawl_delay_s is None else repr(crawl_delay_s)
        key = self.keys.host_key(host)
        await self._call(lambda: self.redis.hset(key, "crawl_delay", value))

    def host_wait_s(self, host: str) -> float:
        slot = self._held.get(host)
        return 0.0 if slot is None else slot.next_allowed_at - time.monotonic()

    async def wait_host_ready(self, host: str) -> None:
        slot = self._held.get(host)
        if slot is None:  # not held: read the shared state
            key = self.keys.host_key(host)
            next_ms = await self._call(lambda: self.redis.hget(key, "next"))
            slot = HostSlot(host, next_allowed_at=self._clock.to_local(float(next_ms or 0)))
        delay = slot.next_allowed_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def finish_host(self, host: str) -> None:
        slot = self._held.pop(host, None)
        if slot is None:
            return
        health = slot.health
        args: list[str | bytes | int] = [
            self.worker_id,
            host,
            self._clock.to_redis(slot.next_allowed_at),
        ]
        args += [self._crawl_delay_arg(slot), repr(health.backoff_s)]
        args += [health.consecutive_failures, self._clock.to_redis(health.paused_until)]
        await self._run("FINISH", args, self.keys.bucket_of(host))
        self._changed(host)
        self._wake.set()

    @property
    def current_host(self) -> str | None:
        """A host this worker holds right now (for `trawler workers`)."""
        return next(iter(self._held), None)

    def _hold(self, host: str, next_ms: int, *state: bytes) -> None:
        """Keep a held host's politeness state locally until finish_host."""
        crawl_delay, backoff, failures, paused_ms = state
        slot = HostSlot(host, next_allowed_at=self._clock.to_local(next_ms), busy=True)
        slot.crawl_delay_s = float(crawl_delay) if crawl_delay else None
        slot.health.backoff_s = float(backoff or 0)
        slot.health.consecutive_failures = int(failures or 0)
        slot.health.paused_until = self._clock.to_local(float(paused_ms or 0))
        self._held[host] = slot

    def _gap_args(self) -> list[int]:
        """The job's interval before Crawl-delay and back-off, and its Crawl-delay cap:
        the scripts keep the host's interval with each hold, so that when the worker
        dies holding it, the host waits a full interval after the hold's end (a
        request the worker sent just before its death is recorded nowhere)."""
        policy = self.policy
        return [ms(policy.delay_s + SPACING_MARGIN_S), ms(policy.max_crawl_delay_s)]

    def _local_slot(self, host: str) -> HostSlot:
        """The held host's slot; a throw-away one for a host not held (nothing to space)."""
        return self._held.get(host) or HostSlot(host)

    def _crawl_delay_arg(self, slot: HostSlot) -> str:
        if slot.host not in self._crawl_delay_dirty:
            return "-"
        self._crawl_delay_dirty.discard(slot.host)
        return "" if slot.crawl_delay_s is None else repr(slot.crawl_delay_s)
