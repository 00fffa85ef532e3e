"""What a worker's Redis frontier keeps up in the background, and the job's counts.

A background task (``_keep_alive``, started by ``open`` unless
``auto_renew`` is off) renews this worker's URL leases and host holds well
before they expire (RENEW, a third of the lease time), measures the Redis
clock offset again when it is stale (redis_conn.py), and refreshes the job's
counts every ``STATS_REFRESH_S``: ``queued``, ``leased`` and ``active_hosts``
are those approximate counts; ``stats()`` and ``urls_seen()`` read exact ones.
A Redis that is restarting or busy only skips a round.

``FrontierUpkeep`` is a part of ``RedisFrontier`` (redis.py), which builds the
state declared below; its methods are the frontier's own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from trawler.frontier.redis_codec import lease_key, ms
from trawler.frontier.redis_conn import transient_redis_error
from trawler.slowstop import wait_event

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from trawler.frontier.redis_conn import RedisClock
    from trawler.frontier.redis_keys import KeySpace
    from trawler.frontier.redis_options import RedisFrontierOptions
    from trawler.frontier.redis_reserve import ClusterBudget
    from trawler.politeness import HostSlot

STATS_REFRESH_S = 1.0


class FrontierUpkeep:
    """Lease renewal, the clock offset and the job's counts (module doc)."""

    # Built by RedisFrontier.__init__ (redis.py).
    redis: Redis
    options: RedisFrontierOptions
    keys: KeySpace
    worker_id: str
    budget: ClusterBudget | None
    _inflight: dict[int, bytes]  # fp -> payload of URLs leased to this worker
    _inflight_bucket: dict[int, int]  # fp -> bucket, of _inflight
    _held: dict[str, HostSlot]  # hosts this worker holds
    _clock: RedisClock
    _stats: tuple[int, int, int]  # queued, leased, active hosts
    _keeper_done: asyncio.Event  # set by aclose: ends _keep_alive
    # RedisFrontier's script runner and retried call (redis.py).
    _run: Callable[..., Awaitable[Any]]
    _call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

    # Approximate, refreshed every STATS_REFRESH_S by the background task.
    @property
    def queued(self) -> int:
        return self._stats[0]

    @property
    def leased(self) -> int:
        return self._stats[1]

    @property
    def active_hosts(self) -> int:
        return self._stats[2]

    async def renew_leases(self) -> None:
        """Push back the expiry of this worker's URL leases and host holds."""
        if self.budget is not None:  # first: a place never ends before its lease
            await self.budget.renew()
        if not self._inflight and not self._held:
            return
        lease_ms = ms(self.options.lease_timeout_s)
        where = self._inflight_bucket
        self._inflight_bucket = {fp: where.get(fp, 0) for fp in self._inflight}
        for bucket in self.keys.all_buckets():
            fps = [lease_key(payload) for fp, payload in self._inflight.items()
                   if self._inflight_bucket[fp] == bucket]  # fmt: skip
            hosts = [host for host in self._held if self.keys.bucket_of(host) == bucket]
            if fps or hosts:
                await self._run("RENEW", [self.worker_id, lease_ms, len(fps), *fps, *hosts], bucket)

    async def stats(self) -> tuple[int, int, int]:
        """Exact (queued, leased, active hosts) of the job, from Redis."""
        await self._refresh_stats()
        return self._stats

    async def urls_seen(self) -> int:
        """Size of the job's seen set: every URL discovered (for `trawler stats`)."""
        buckets = []
        for bucket in self.keys.all_buckets():
            match = self.keys.job_prefix(bucket) + "seen:*"
            buckets += [key async for key in self.redis.scan_iter(match=match, count=1000)]
        total = 0
        for start in range(0, len(buckets), 1000):
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in buckets[start : start + 1000]:
                    pipe.hlen(key)
                total += sum(await pipe.execute())
        return total

    async def _sync_clock(self) -> None:
        await self._call(lambda: self._clock.measure(self.redis))

    async def _refresh_stats(self) -> None:
        async def read() -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                for bucket in self.keys.all_buckets():
                    jp = self.keys.job_prefix(bucket)
                    pipe.get(jp + "queued")
                    pipe.zcard(jp + "lease_exp")
                    pipe.zcard(jp + "held")
                return cast(list[Any], await pipe.execute())

        counts = await self._call(read)
        queued = sum(int(n or 0) for n in counts[0::3])
        self._stats = (queued, sum(counts[1::3]), sum(counts[2::3]))

    async def _keep_alive(self) -> None:
        """Renew leases well before they expire; refresh stats and the clock offset."""
        renew_every_s = self.options.lease_timeout_s / 3
        last_renew = time.monotonic()
        while not self._keeper_done.is_set():
            await wait_event(self._keeper_done, min(STATS_REFRESH_S, renew_every_s))
            if self._keeper_done.is_set():
                return
            try:
                now = time.monotonic()
                if now - last_renew >= renew_every_s:
                    await self.renew_leases()
                    last_renew = now
                if self._clock.stale(now):
                    await self._sync_clock()
                await self._refresh_stats()
            except Exception as exc:
                if not transient_redis_error(exc):
                    raise
                continue  # Redis is restarting or busy: try again on the next round
