"""Due revisits in the Redis frontier (issue 15, distributed backend): per-host lanes
beside each host's queues, leased by the same NEXT script under the same host holds,
and the feed that fills them from PostgreSQL (store/dist_revisits.py).

Keys, per job (besides redis.py's):

    trawler:{job}:r:<host>   LIST  the host's due revisits (entries below), oldest first
    trawler:{job}:rturn      SET   hosts whose last turn went to a revisit
    trawler:{job}:rpending   HASH  key -> 1 for each revisit in a lane or leased
    trawler:{job}:rpoll      counter: polls of due pages begun
    trawler:{job}:racked     HASH  key -> the poll counter when its visit was committed
    trawler:{job}:rfeeder    the worker feeding the lanes (expires: PX)

The turn rule is recrawl_lanes.py's, in NEXT (``take``): a host whose last turn was
a revisit's gives this one to a new URL if it has one; otherwise a revisit goes
first. So a host with new URLs gives revisits at most every other turn, and a host
with only revisits gives them every turn. Politeness is the host's hold and
next-allowed time, as for any URL: one request in flight per host, one interval
between any two, over new URLs and revisits alike.

A page is visited once per due time. ``rpending`` admits a page into a lane once
while it is queued or leased. A poll (``FEED_BEGIN``: one feeder at a time, its
turn expiring) takes a number before it reads PostgreSQL; a visit committed after
that (``RDONE`` stamps ``racked`` with the current number) may be missing from what
the poll read, so ``RADD`` skips it; ``RADD`` of an older poll than the latest is
refused whole. A revisit whose lease expires (its worker died) is dropped, not
queued again: its page is still due in PostgreSQL unless its visit was committed,
and is fed again once its claim expires. Queued again here, a visit committed just
before the worker died would be made twice. A worker that only stalled past its lease
and then commits takes back the copy fed meanwhile (``RDONE``: the entry is the same).

An entry is ``\\x01`` + JSON [state fields..., depth] + an 8-byte key: the page's
URL fingerprint XOR ``REVISIT_SALT``, so that a revisit's lease never shares its
key with a new URL's (redis_codec.py: the last 8 bytes are the lease key).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trawler.dedup import url_fingerprint
from trawler.frontier.redis_codec import SCRIPT_CHUNK, chunks, decode_request, fp8, ms
from trawler.frontier.redis_keys import CLUSTER_BUCKETS, KeySpace
from trawler.records import CrawlRequest
from trawler.recrawl_lanes import revisit_request, state_of
from trawler.store.versions import STATE_COLUMNS, RevisitState

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from trawler.frontier.redis import RedisFrontier

MARK = b"\x01"  # never the first byte of a URL entry (redis_codec.py)
REVISIT_SALT = 0x5245_5649_5349_5421  # "REVISIT!"

# Lua, appended to redis_prelude.PRELUDE (it uses pop): NEXT's choice between a
# host's new URLs and its revisits.
TAKE_LIB = """
-- The entry this turn of the host goes to: payload, depth, is a revisit; nil if none.
-- ``revisits``: the job revisits pages (else no command is spent on its lanes).
local function take(host, revisits)
  local rkey, turns = jp .. 'r:' .. host, jp .. 'rturn'
  if not revisits or redis.call('EXISTS', rkey) == 0 then
    local payload, depth = pop(host)
    return payload, depth, false
  end
  local revisit_last = redis.call('SISMEMBER', turns, host) == 1
  if not revisit_last then
    local payload = redis.call('LPOP', rkey)
    if payload then
      redis.call('SADD', turns, host)
      return payload, '0', true
    end
  end
  local payload, depth = pop(host)
  if payload then
    redis.call('SREM', turns, host)
    return payload, depth, false
  end
  return redis.call('LPOP', rkey), '0', true  -- revisits only: every turn theirs
end
"""

# ARGV: jp, worker, turn_ms -> {poll number (0: another worker feeds), revisits pending}
FEED_BEGIN = """
local jp, worker = ARGV[1], ARGV[2]
local pending = redis.call('HLEN', jp .. 'rpending')
local owner = redis.call('GET', jp .. 'rfeeder')
if owner and owner ~= worker then return {0, pending} end
redis.call('SET', jp .. 'rfeeder', worker, 'PX', ARGV[3])
return {redis.call('INCR', jp .. 'rpoll'), pending}
"""

# On a Redis Cluster (a bucket's prefix): the poll number FEED_BEGIN gave out, in the
# bucket's own ``rpoll`` (RADD and RDONE read it there) before the poll reads PostgreSQL.
# ARGV: jp, poll -> revisits pending in the bucket
RBEGIN = """
local jp, poll = ARGV[1], tonumber(ARGV[2])
if poll > tonumber(redis.call('GET', jp .. 'rpoll') or 0) then
  redis.call('SET', jp .. 'rpoll', ARGV[2])
end
return redis.call('HLEN', jp .. 'rpending')
"""

# ARGV: jp, hp, job, poll, then (key, host, payload) each -> added, or -1: poll refused
RADD_BODY = """
local job, poll = ARGV[3], tonumber(ARGV[4])
if poll ~= tonumber(redis.call('GET', jp .. 'rpoll') or 0) then return -1 end
-- visits committed before this poll began are in what it read: forget them
local acked = redis.call('HGETALL', jp .. 'racked')
for i = 1, #acked, 2 do
  if tonumber(acked[i + 1]) < poll then redis.call('HDEL', jp .. 'racked', acked[i]) end
end
local added, touched = 0, {}
for i = 5, #ARGV, 3 do
  local key, host = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', jp .. 'racked', key) == 0
      and redis.call('HSETNX', jp .. 'rpending', key, 1) == 1 then
    redis.call('RPUSH', jp .. 'r:' .. host, ARGV[i + 2])
    added = added + 1
    touched[host] = true
  end
end
for host in pairs(touched) do
  if not held_by_job(hp .. host, job) then schedule(host, host_next(host)) end
end
return added
"""

# ARGV: jp, hp, job, worker, then (key, host, payload) each: their visits are committed
# in PostgreSQL.
RDONE_BODY = """
local worker = ARGV[4]
local poll = redis.call('GET', jp .. 'rpoll') or '0'
for i = 5, #ARGV, 3 do
  local key, host, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local v = redis.call('HGET', jp .. 'lease', key)
  if v and string.sub(v, 1, #worker + 1) == worker .. ' ' then
    redis.call('HDEL', jp .. 'lease', key)
    redis.call('ZREM', jp .. 'lease_exp', key)
    redis.call('HDEL', jp .. 'rpending', key)
  elseif redis.call('LREM', jp .. 'r:' .. host, 1, payload) > 0 then
    -- our lease had expired (a stalled worker) and the page was fed again, with the
    -- same state: that copy would visit it twice for one due time
    redis.call('HDEL', jp .. 'rpending', key)
  end
  redis.call('HSET', jp .. 'racked', key, poll)
end
return 1
"""


def revisit_key(url: str) -> bytes:
    return fp8(url_fingerprint(url) ^ REVISIT_SALT)


def encode_revisit(request: CrawlRequest) -> bytes:
    state = state_of(request)
    fields = [getattr(state, name) for name in STATE_COLUMNS]
    body = json.dumps([*fields, request.depth], separators=(",", ":"), ensure_ascii=False)
    return MARK + body.encode() + revisit_key(state.url)


def decode_entry(payload: bytes, host: str, depth: int) -> CrawlRequest:
    """A leased entry: a revisit, or a URL queued at ``depth`` (redis_codec.py)."""
    if payload[:1] != MARK:
        return decode_request(payload, host, depth)
    *fields, page_depth = json.loads(payload[1:-8])
    return revisit_request(RevisitState(*fields), page_depth)


class RedisRevisits:
    """The revisit side of one worker's ``RedisFrontier`` (its companion: it calls
    Redis through the frontier's keys, outage guard and leases)."""

    def __init__(self, frontier: RedisFrontier) -> None:
        from trawler.frontier.redis_scripts import PRELUDE

        self.frontier = frontier
        client = frontier.redis
        self._begin = client.register_script(FEED_BEGIN)
        self._bucket_begin = client.register_script(RBEGIN)
        self._add = client.register_script(PRELUDE + RADD_BODY)
        self._done = client.register_script(PRELUDE + RDONE_BODY)

    async def begin_poll(self, turn_s: float) -> tuple[int, int]:
        """(poll number, revisits pending); number 0: another worker is feeding.

        On a cluster the feeder's turn and the poll numbers are in the job's own slot,
        the lanes in the buckets: each bucket is told the number before the poll reads
        PostgreSQL (RBEGIN), so a visit committed there later is stamped with it."""
        f = self.frontier
        jp = f.keys.job_wide_prefix()
        args: list[Any] = [jp, f.worker_id, ms(turn_s)]
        poll, pending = await f._call(lambda: self._begin(keys=[jp + "rpoll"], args=args))
        if f.keys.buckets == 1 or not poll:
            return int(poll), int(pending)
        pending = 0
        for bucket in f.keys.all_buckets():
            bp = f.keys.job_prefix(bucket)
            pending += await f._call(
                lambda bp=bp: self._bucket_begin(keys=[bp + "rpoll"], args=[bp, poll])  # type: ignore[misc]
            )
        return int(poll), int(pending)

    async def add(self, poll: int, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        """Queue due revisits read by ``poll``; returns those refused (a newer poll
        began since: their claims should be released)."""
        f = self.frontier
        refused: list[CrawlRequest] = []
        for bucket, group in f._by_bucket(requests):
            jp = f.keys.job_prefix(bucket)
            for start in range(0, len(group), SCRIPT_CHUNK):
                args: list[Any] = [jp, f.keys.host_prefix(bucket), f.options.job_id, poll]
                for r in group[start : start + SCRIPT_CHUNK]:
                    args += [revisit_key(r.url), r.host, encode_revisit(r)]
                added = await f._call(
                    lambda args=args, jp=jp: self._add(keys=[jp + "rpoll"], args=args)  # type: ignore[misc]
                )
                if added < 0:
                    refused += group[start:]
                    break
                if added:
                    f._wake.set()
        return refused

    async def done(self, requests: Sequence[CrawlRequest]) -> None:
        """Their visits are committed in PostgreSQL: end their leases and lanes."""
        f = self.frontier
        for bucket, group in f._by_bucket(requests):
            jp = f.keys.job_prefix(bucket)
            for chunk in chunks(group):
                args: list[Any] = [jp, f.keys.host_prefix(bucket), f.options.job_id, f.worker_id]
                for r in chunk:
                    payload = f._inflight.get(r.fp) or encode_revisit(r)
                    args += [revisit_key(r.url), r.host, payload]
                await f._call(
                    lambda args=args, jp=jp: self._done(keys=[jp + "rpoll"], args=args)  # type: ignore[misc]
                )
                for r in chunk:
                    f._inflight.pop(r.fp, None)
                f._changed(chunk[0].host)
        if f.budget is not None:
            await f.budget.release([r.fp for r in requests])
        f._wake.set()


async def reset_lanes(client: Redis, job_id: str, prefix: str = "trawler") -> None:
    """Empty the job's revisit lanes and forget what they admitted, before a revisit pass
    of the job (jobs/postgres_passes.py): its pages are all due again in PostgreSQL and
    are fed anew. ``rpoll`` stays: poll numbers only grow (RADD compares them). On a
    cluster, in every bucket (a bucket's keys share a slot: one DEL each)."""
    from redis.asyncio import RedisCluster

    keys = KeySpace(prefix, job_id, CLUSTER_BUCKETS if isinstance(client, RedisCluster) else 1)
    for bucket in keys.all_buckets():
        jp = keys.job_prefix(bucket)
        lanes = [key async for key in client.scan_iter(match=jp + "r:*", count=1000)]
        for start in range(0, len(lanes), 1000):
            await client.delete(*lanes[start : start + 1000])
        await client.delete(jp + "rpending", jp + "racked", jp + "rturn")
    await client.delete(keys.job_wide_prefix() + "rfeeder")
