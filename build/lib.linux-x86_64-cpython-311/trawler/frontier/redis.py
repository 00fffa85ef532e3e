"""The distributed frontier: many workers on many machines share one job in Redis.

Same contract as the embedded frontier (base.py), with the state in Redis and
every scheduling step one Lua script (redis_scripts.py), so two workers never
get the same host at once nor within its interval.

Key layout, per job (hash tag ``{job}``) and per host across all jobs:

    trawler:{job}:l:<d>:<host>  LIST  URLs queued at depth d, compact entries (redis_codec.py)
    trawler:{job}:d:<host>      ZSET  the depths d that have a list
    trawler:{job}:q:<host>      ZSET  URLs queued by an older version (JSON members)
    trawler:{job}:ready         ZSET  hosts with queued URLs, score = next-allowed (ms)
    trawler:{job}:seen:<hhhh>   HASH  URL-seen set: bucket = first 16 bits of the
    trawler:{job}:seen:<b>:<x>        fingerprint, or b bits once split, field = the
    trawler:{job}:seenmeta      HASH  last 6 bytes (~12 B a URL: redis_seen.py)
    trawler:{job}:lease         HASH  fp -> "worker depth host payload" for URLs handed out
    trawler:{job}:lease_exp     ZSET  fp -> lease expiry (ms)
    trawler:{job}:requeued      HASH  fp of URLs whose lease expired and went back to a queue
    trawler:{job}:held          ZSET  host -> hold expiry, for hosts this job holds
    trawler:{job}:queued        counter
    trawler:{job}:pages         the job's pages stored, for --max-pages (redis_budget.py)
    trawler:{job}:admitted      HASH  host -> URLs admitted, for --max-pages-per-host
    trawler:{job}:host_budget_refused  counter: URLs refused for their host's budget
    trawler:{job}:robots:<profile>:<origin>  HASH  a robots.txt fetch that failed (TTL)
    trawler:host:{<host>}       HASH  next (ms), crawl_delay, owner, job, until
    trawler:robots:<profile>:<origin>  HASH  a robots.txt answer, for every job whose
                                      fetcher has that profile (headers, reach) (TTL)
    trawler:{job}:clock         Redis time (ms) of the job's last NEXT/RENEW
    trawler:workers             HASH  worker id -> JSON heartbeat (workers.py)

Outages: with a ``ServiceHealth`` (outage.py), every Redis call is retried
through an outage of any length, so a fetch task's call waits instead of
failing its URL; so is a BUSY answer (another client's script running long)
and a timeout. Each script call does bounded work: a batch of URLs goes in
chunks of ``SCRIPT_CHUNK``, so the longest call stays far below the client's
socket timeout (redis_conn.py), and a call is never re-sent while Redis may
still be running it. Lease time runs only while the job's frontier is in use: a
gap in which no worker reached Redis pushes the job's leases and holds back
by its length (redis_scripts.py), so after a long outage the live workers
keep their URLs and hosts, while a dead worker's still expire.

While a worker holds a host, the host's politeness state lives in a local
``HostSlot`` (record_sent and set_crawl_delay are synchronous); finish_host
writes it back. Its monotonic times and Redis times convert through the offset
``RedisClock`` measures against ``TIME`` (redis_conn.py).

Redis Cluster (``redis+cluster://``, redis_keys.py): the layout above is
bucket 0 of one; on a cluster the hosts are split into buckets, each with its
hash tag, and the keys above (``ready``, leases, holds, counters, seen set, host
hashes) exist once per bucket, holding its hosts. Each script call runs in one
bucket; next() polls the buckets in turn, from a different one each call, and
the job is done when two sweeps in a row find every bucket empty with no URL
added in between (a URL's children are added before it is acknowledged, so
work moving from one bucket to another is seen by one of the sweeps).
--max-pages reserves places in the job's own slot before the sweep
(redis_reserve.py); revisits have lanes per bucket, their feeder's turn in the
job's own slot (redis_revisits.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from redis.asyncio import Redis, RedisCluster

from trawler.frontier import redis_scripts as lua
from trawler.frontier.hosts import HostTable
from trawler.frontier.redis_codec import (
    chunks,
    commit_done_args,
    commit_new_args,
    encode_request,
    fp8,
    lease_key,
    ms,
)
from trawler.frontier.redis_conn import RedisClock, connect_redis, transient_redis_error
from trawler.frontier.redis_keys import CLUSTER_BUCKETS, KeySpace
from trawler.frontier.redis_reserve import ClusterBudget
from trawler.frontier.redis_revisits import RedisRevisits, decode_entry
from trawler.frontier.redis_robots import SharedRobots
from trawler.frontier.redis_seen import SEEN_BASE_BITS
from trawler.outage import OutageAbandoned, ServiceHealth, guarded
from trawler.politeness import SPACING_MARGIN_S, HostSlot, PolitenessPolicy
from trawler.records import CrawlRequest, RobotsFetch

T = TypeVar("T")

STATS_REFRESH_S = 1.0


@dataclass(slots=True, frozen=True)
class RedisFrontierOptions:
    job_id: str
    worker_id: str = ""  # default: a fresh uuid; must not contain spaces
    lease_timeout_s: float = 60.0
    max_wait_s: float = 0.5  # longest sleep in next(), so new work is noticed
    busy_retry_s: float = 0.2  # look again at a host another job is holding
    auto_renew: bool = True  # renew leases, refresh stats and clock in the background
    prefix: str = "trawler"
    seen_base_bits: int = SEEN_BASE_BITS  # tests only: buckets split from 2**bits up
    # The job's budgets, over all its workers (redis_budget.py); None: no limit.
    max_pages: int | None = None
    max_pages_per_host: int | None = None
    # Host buckets (redis_keys.py); 0: 1 on one Redis, CLUSTER_BUCKETS on a cluster.
    buckets: int = 0


class RedisFrontier:
    """One worker's view of a job's shared frontier (the Frontier protocol, plus
    ``commit`` for the distributed backend and leases for workers).

    ``health``: retry every call through a Redis outage (workers); without it a
    call fails at once (commands such as `trawler stats`). ``gate``: hand out no
    URL while that service (the page store) is down, so results do not pile up.
    """

    def __init__(
        self,
        client: Redis,
        policy: PolitenessPolicy,
        options: RedisFrontierOptions,
        health: ServiceHealth | None = None,
    ):
        self.redis = client
        self.policy = policy
        self.options = options
        self.health = health
        self.gate: ServiceHealth | None = None
        self.worker_id = options.worker_id or uuid.uuid4().hex
        if " " in self.worker_id:
            raise ValueError("worker id must not contain spaces")
        buckets = options.buckets or (CLUSTER_BUCKETS if _is_cluster(client) else 1)
        self.keys = KeySpace(options.prefix, options.job_id, buckets)
        # --max-pages on a cluster: places reserved in a slot of their own (redis_reserve.py)
        self.budget = (
            ClusterBudget(self, options.max_pages) if buckets > 1 and options.max_pages else None
        )
        self._jp = self.keys.job_prefix(0)  # job-wide keys outside the scripts
        self._hp = self.keys.host_prefix(0)
        self._turn = 0  # the bucket next() starts from
        self._known: dict[int, tuple[float, bool]] = {}  # bucket -> nothing ready until, done
        self._inflight_bucket: dict[int, int] = {}  # fp -> bucket, of _inflight
        # URLs this worker's commits refused for their host's budget (redis_budget.py)
        self.budget_refusals = 0
        self._scripts = {name: client.register_script(text) for name, text in lua.SCRIPTS.items()}
        self._robots = SharedRobots(client, f"{options.prefix}:", self._jp, health)
        self._held: dict[str, HostSlot] = {}  # hosts this worker holds
        self._crawl_delay_dirty: set[str] = set()
        self._inflight: dict[int, bytes] = {}  # fp -> payload of URLs leased to this worker
        self._clock = RedisClock()
        self._stats = (0, 0, 0)  # queued, leased, active hosts
        self._closed = False
        self._wake = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self._keeper_done = asyncio.Event()  # set by aclose: ends _keep_alive
        self._background: set[asyncio.Task[None]] = set()
        self.revisits = RedisRevisits(self)  # due revisits' lanes (redis_revisits.py)
        self.revisits_continuous = False  # a continuous job: next() waits, never done

    @classmethod
    async def connect(
        cls,
        url: str,
        policy: PolitenessPolicy,
        options: RedisFrontierOptions,
        health: ServiceHealth | None = None,
    ) -> RedisFrontier:
        frontier = cls(connect_redis(url), policy, options, health)
        await frontier.open()
        return frontier

    async def open(self) -> None:
        await self._sync_clock()
        await self._refresh_stats()
        if self.options.auto_renew and self._keeper is None:
            self._keeper = asyncio.create_task(self._keep_alive())

    async def aclose(self) -> None:
        """Stop the background task and close the connection pool."""
        self.close()
        if self._keeper is not None:
            # Cancelling alone is not enough: redis-py may turn the cancellation of a
            # call in flight into an ordinary error ("Timeout connecting to server"),
            # which _keep_alive takes for a passing one and goes on from; aclose then
            # waited for it forever (a worker that never exited, 1 run in ~20).
            self._keeper_done.set()
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            self._keeper = None
        await self.redis.aclose()

    # -- the Frontier protocol ---------------------------------------------------
    def set_policy(self, policy: PolitenessPolicy) -> None:
        """New politeness settings, live: hosts this worker takes from now on follow them."""
        self.policy = policy

    def share_hosts(self, table: HostTable) -> None:
        """Nothing to do: host state lives in Redis, shared by every job and process."""

    async def filter_new(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        """Drop URLs in the seen set and repeats; commit() marks the rest seen."""
        unique = list({r.fp: r for r in requests}.values())
        fresh: set[int] = set()
        for bucket, group in self._by_bucket(unique):
            for chunk in chunks(group):
                fps = [fp8(r.fp) for r in chunk]
                seen = await self._run("SEEN", [self.options.seen_base_bits, *fps], bucket)
                fresh.update(r.fp for r, known in zip(chunk, seen, strict=True) if not known)
        return [r for r in unique if r.fp in fresh]

    async def commit(
        self,
        new_requests: list[CrawlRequest],
        done: list[CrawlRequest],
        pages_stored: int | None = None,
    ) -> None:
        """Schedule unseen new URLs (within the per-host budget), then acknowledge ``done``.

        One script call per ``SCRIPT_CHUNK`` URLs; each is idempotent, so a call
        retried after an unknown outcome, or a whole commit retried after a
        failure half-way, schedules each URL once. ``done`` goes last: until
        then its URLs stay leased, and are fetched again if this worker dies.
        ``pages_stored``: the job's pages as the store counted them in this
        commit, for --max-pages (redis_budget.py); recorded before the leases end.
        """
        head = [self.options.seen_base_bits, self.options.max_pages_per_host or 0]
        for bucket, group in self._by_bucket(new_requests):
            self._known.pop(bucket, None)
            for chunk in chunks(group):
                added, refused = await self._run("COMMIT", [*head, *commit_new_args(chunk)], bucket)
                if added:
                    self._wake.set()
                self.budget_refusals += refused
        if pages_stored is not None and self.options.max_pages is not None:
            if self.budget is not None:
                await self.budget.record_pages(pages_stored)
            else:
                await self._run("PAGES", [pages_stored])
        for bucket, group in self._by_bucket(done):
            self._known.pop(bucket, None)
            for chunk in chunks(group):
                args = commit_done_args(chunk, self._inflight)
                await self._run("COMMIT", [*head, *args], bucket)
                for r in chunk:
                    self._inflight.pop(r.fp, None)
                self._wake.set()
        if self.budget is not None and done:
            await self.budget.release([r.fp for r in done])

    async def host_budget_refused(self) -> int:
        """URLs the job's commits refused for their host's budget, each counted once
        by the COMMIT that marked it seen (redis_budget.py), over all buckets."""
        keys = [self.keys.job_prefix(b) + "host_budget_refused" for b in self.keys.all_buckets()]

        async def read() -> int:
            return sum([int(await self.redis.get(key) or 0) for key in keys])

        return await self._call(read)

    async def next(self) -> CrawlRequest | None:
        opts = self.options
        lease_ms, retry_ms = ms(opts.lease_timeout_s), ms(opts.busy_retry_s)
        while not self._closed:
            self._wake.clear()
            if self.gate is not None and not self.gate.up:
                await self._wait_wake(opts.max_wait_s)
                continue
            args: list[str | int] = [self.worker_id, lease_ms, retry_ms, 100, *self._gap_args(),
                                     int(self.revisits_continuous),
                                     0 if self.budget else opts.max_pages or 0]  # fmt: skip
            try:
                reply, place = await self._next_reply(args)
            except OutageAbandoned:
                return None  # stopping while Redis is down: like close()
            if reply[0] == 0 and not self.revisits_continuous:
                return None
            if reply[0] == 2:
                payload, host, depth = reply[1], reply[2].decode(), int(reply[3])
                request = decode_entry(payload, host, depth)
                self._inflight[request.fp] = payload
                self._inflight_bucket[request.fp] = self.keys.bucket_of(host)
                if place is not None and self.budget is not None:
                    self.budget.bind(place, request.fp)
                self._hold(request.host, *reply[4:])
                return request
            idle = reply[0] == 0 or reply[1] < 0  # nothing ready (0: only pages to come due)
            wait_s = opts.max_wait_s if idle else min(reply[1] / 1000, opts.max_wait_s)
            await self._wait_wake(wait_s)
        return None

    async def _next_reply(self, args: list[str | int]) -> tuple[Any, str | None]:
        """NEXT's reply, and the place reserved for its URL under --max-pages on a
        cluster (redis_reserve.py; given back when no URL came of it)."""
        if self.keys.buckets == 1:
            return await self._run("NEXT", args), None
        if self.budget is None:
            return await self._sweeps(args), None
        place = await self.budget.reserve()
        if isinstance(place, list):
            return place, None
        try:
            reply = await self._sweeps(args)
        except BaseException:
            self.budget.forget(place)  # not renewed: it expires (Redis may be down)
            raise
        if reply[0] != 2:
            await self.budget.give_back(place)
            return reply, None
        return reply, place

    async def _sweeps(self, args: list[str | int]) -> Any:
        """A sweep that skips the buckets known to have nothing ready (``_known``);
        when all look done, sweeps of every bucket until two in a row find them all
        done with the same URLs added (module doc)."""
        reply, _marks = await self._sweep(args, skip_known=True)
        marks: dict[int, Any] | None = None
        while reply[0] == 0:
            reply, done_marks = await self._sweep(args, skip_known=False)
            if reply[0] != 0 or done_marks == marks:
                return reply
            marks = done_marks
        return reply

    async def _sweep(self, args: list[str | int], skip_known: bool) -> tuple[Any, dict[int, Any]]:
        """NEXT on each bucket from the next in turn: the first URL handed out, else
        the shortest wait ({1, -1}: nothing ready), else {0} with each bucket's count
        of URLs added. A bucket that had nothing ready is left alone until its wait
        ends, at most ``max_wait_s`` (this worker's own changes to it forget that)."""
        n, now = self.keys.buckets, time.monotonic()
        start, self._turn = self._turn, (self._turn + 1) % n
        waits: list[float] = []
        marks: dict[int, Any] = {}
        for bucket in ((start + i) % n for i in range(n)):
            until, done = self._known.get(bucket, (0.0, False))
            if skip_known and until > now:
                if not done:
                    waits.append(until - now)
                continue
            reply = await self._run("NEXT", args, bucket)
            if reply[0] == 2:
                return reply, {}
            wait_s = self.options.max_wait_s if reply[0] == 0 or reply[1] < 0 else reply[1] / 1000
            self._known[bucket] = (time.monotonic() + min(wait_s, self.options.max_wait_s),
                                   reply[0] == 0)  # fmt: skip
            if reply[0] == 0:
                marks[bucket] = reply[1:]
            else:
                waits.append(-1 if reply[1] < 0 else reply[1] / 1000)
        if not waits:
            return [0], marks
        ready = [w for w in waits if w >= 0]
        return [1, round(min(ready) * 1000) if ready else -1], marks

    def _changed(self, host: str) -> None:
        """This worker changed the host's bucket: look at it on the next sweep."""
        self._known.pop(self.keys.bucket_of(host), None)

    async def _wait_wake(self, wait_s: float) -> None:
        if wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait_s)

    def record_sent(self, host: str, sent_at: float) -> None:
        self.policy.after_request(self._local_slot(host), sent_at)

    def record_response(
        self, host: str, status: int | None, error: str | None, retry_after_s: float | None
    ) -> None:
        slot = self._local_slot(host)
        self.policy.after_response(slot, status, error, retry_after_s, time.monotonic())

    async def retry_later(self, request: CrawlRequest, delay_s: float) -> None:
        """Queue the URL again after ``delay_s`` (its host is not delayed).

        It waits in Redis, not in this process, so it survives the worker;
        until it is due it counts as work in progress.
        """
        key = lease_key(self._inflight.pop(request.fp, b"") or encode_request(request))
        args: list[str | bytes | int] = [self.worker_id, key, encode_request(request)]
        args += [request.host, request.depth, ms(delay_s)]
        await self._run("RETRY_LATER", args, self.keys.bucket_of(request.host))
        self._changed(request.host)
        if self.budget is not None:
            await self.budget.release([request.fp])

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

    async def hand_back(self, request: CrawlRequest, delay_s: float = 0.0) -> None:
        slot = self._held.get(request.host)
        if slot is not None:
            slot.next_allowed_at = max(slot.next_allowed_at, time.monotonic() + delay_s)
        payload = self._inflight.pop(request.fp, b"") or encode_request(request)
        key = lease_key(payload)
        args: list[str | bytes | int] = [self.worker_id, key, payload, request.host]
        args += [request.depth, ms(delay_s)]
        await self._run("HAND_BACK", args, self.keys.bucket_of(request.host))
        self._changed(request.host)
        self._wake.set()
        if self.budget is not None:
            await self.budget.release([request.fp])

    def set_revisit_mode(self, continuous: bool, discovery: bool) -> None:
        """A continuous job (recrawl_flow.py): more revisits may come, so next() waits
        when nothing is queued. New URLs are always crawled beside them here."""
        self.revisits_continuous = continuous
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

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

    # -- leases, heartbeats, stats -----------------------------------------------
    async def shared_robots(self, site: str, profile: str) -> RobotsFetch | None:
        """The robots.txt another worker fetched for ``site``, while it is fresh."""
        return await self._robots.get(site, profile)

    async def share_robots(
        self, site: str, profile: str, fetch: RobotsFetch, ttl_s: float, *, job_only: bool
    ) -> None:
        await self._robots.put(site, profile, fetch, ttl_s, job_only=job_only)

    async def render_misses(self, host: str | None = None) -> dict[str, int]:
        key = self._jp + "render_misses"
        if host is not None:
            misses = await self._call(lambda: self.redis.hget(key, host))
            return {host: int(misses)} if misses else {}
        kept = await self._call(lambda: self.redis.hgetall(key))
        return {_text(name): int(misses) for name, misses in kept.items()}

    async def count_render_miss(self, host: str, added: bool) -> int:
        """One count per job for all its workers: what one learnt, the others use."""
        key = self._jp + "render_misses"
        if added:
            await self._call(lambda: self.redis.hdel(key, host))
            return 0
        return int(await self._call(lambda: self.redis.hincrby(key, host, 1)))

    @property
    def current_host(self) -> str | None:
        """A host this worker holds right now (for `trawler workers`)."""
        return next(iter(self._held), None)

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

    # -- internals ---------------------------------------------------------------
    async def _run(self, name: str, args: Sequence[str | bytes | int], bucket: int = 0) -> Any:
        """A script on one bucket's keys; the key named routes it to its shard."""
        script = self._scripts[name]
        jp = self.keys.job_prefix(bucket)
        keys = [jp + "ready"]
        if name == "SEEN":
            return await self._call(lambda: script(keys=keys, args=[jp, *args]))
        full = [jp, self.keys.host_prefix(bucket), self.options.job_id, *args]
        return await self._call(lambda: script(keys=keys, args=full))

    def _by_bucket(self, requests: Sequence[CrawlRequest]) -> list[tuple[int, list[CrawlRequest]]]:
        """The requests grouped by their host's bucket, in order within each."""
        if self.keys.buckets == 1:
            return [(0, list(requests))] if requests else []
        groups: dict[int, list[CrawlRequest]] = {}
        for r in requests:
            groups.setdefault(self.keys.bucket_of(r.host), []).append(r)
        return sorted(groups.items())

    async def _call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Every Redis call goes through here: retried through an outage (see outage.py)."""
        return await guarded(self.health, operation)

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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._keeper_done.wait(), min(STATS_REFRESH_S, renew_every_s)
                )
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


def _is_cluster(client: Redis) -> bool:
    return isinstance(client, RedisCluster)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
