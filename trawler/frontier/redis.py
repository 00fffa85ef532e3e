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
``HostSlot``; finish_host writes it back (redis_holds.py).

Redis Cluster (``redis+cluster://``, redis_keys.py): the layout above is
bucket 0 of one; on a cluster the hosts are split into buckets, each with its
hash tag, and the keys above (``ready``, leases, holds, counters, seen set, host
hashes) exist once per bucket, holding its hosts. Each script call runs in one
bucket; next() sweeps the buckets in turn (redis_sweep.py). --max-pages
reserves places in the job's own slot before the sweep (redis_reserve.py);
revisits have lanes per bucket, their feeder's turn in the job's own slot
(redis_revisits.py).

``RedisFrontier`` is built of parts, one module each, whose methods are its own
(no call goes through a layer in front of them): ``HeldHosts`` (redis_holds.py),
``BucketSweep`` (redis_sweep.py) and ``FrontierUpkeep`` (redis_upkeep.py: lease
renewal, the clock offset, the job's counts). This module holds the rest: the
state, the connection, URLs in (filter_new, commit) and out (next, retry_later,
hand_back), and what the job's workers share (robots.txt, render misses).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

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
from trawler.frontier.redis_conn import RedisClock, connect_redis
from trawler.frontier.redis_holds import HeldHosts
from trawler.frontier.redis_keys import CLUSTER_BUCKETS, KeySpace
from trawler.frontier.redis_options import RedisFrontierOptions
from trawler.frontier.redis_reserve import ClusterBudget
from trawler.frontier.redis_revisits import RedisRevisits, decode_entry
from trawler.frontier.redis_robots import SharedRobots
from trawler.frontier.redis_sweep import BucketSweep
from trawler.frontier.redis_upkeep import FrontierUpkeep
from trawler.outage import OutageAbandoned, ServiceHealth, guarded
from trawler.politeness import HostSlot, PolitenessPolicy
from trawler.records import CrawlRequest, RobotsFetch
from trawler.slowstop import end_task, wait_event

T = TypeVar("T")


class RedisFrontier(HeldHosts, BucketSweep, FrontierUpkeep):
    """One worker's view of a job's shared frontier (the Frontier protocol, plus
    ``commit`` for the distributed backend and leases for workers).

    ``health``: retry every call through a Redis outage (workers); without it a
    call fails at once (commands such as `trawler stats`). ``gate``: hand out no
    URL while that service (the page store) is down, so results do not pile up.
    """

    # Its seen set is Redis's, added to by COMMIT: filter_new's "new" is not lasting.
    seen_lasts = False

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
            await end_task(self._keeper)
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

    async def _wait_wake(self, wait_s: float) -> None:
        if wait_s > 0:
            await wait_event(self._wake, wait_s)

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

    # -- shared with the job's other workers ---------------------------------------
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


def _is_cluster(client: Redis) -> bool:
    return isinstance(client, RedisCluster)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
