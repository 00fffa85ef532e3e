"""Who is working: the workers' heartbeats in Redis, for `trawler workers`.

A worker beats every ``HEARTBEAT_S`` for its whole life, crawling (``live``)
or waiting for work (``idle``), and marks itself ``gone`` when it exits
cleanly. A worker that stopped beating (killed, machine lost) is listed as
gone since its last beat once ``GONE_AFTER_S`` have passed without one; a
gone worker is forgotten after ``FORGET_AFTER_S``.

Every time is read from the Redis server's clock (``TIME``) inside the
scripts, the beat's and the listing's alike: an age is the difference of two
readings of one clock, never the difference of two machines' estimates.

    trawler:workers   HASH  worker id -> JSON {job, state, pages_done,
                            current_host, uptime_s, last_seen_ms[, gone_ms]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from redis.asyncio import Redis

from trawler.outage import ServiceHealth, guarded

HEARTBEAT_S = 1.0
GONE_AFTER_S = 10.0  # ten missed beats: a live worker's loop never stalls that long
FORGET_AFTER_S = 3600.0
STATES = ("live", "idle", "gone")

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: workers hash; ARGV: worker id, beat JSON (without times)
_BEAT = (
    _NOW
    + """
local beat = cjson.decode(ARGV[2])
beat['last_seen_ms'] = now
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(beat))
return 1
"""
)

# KEYS: workers hash; ARGV: worker id
_GONE = (
    _NOW
    + """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if raw then
  local beat = cjson.decode(raw)
  beat['state'] = 'gone'
  beat['gone_ms'] = now
  beat['current_host'] = cjson.null
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(beat))
end
return 1
"""
)

# KEYS: workers hash; ARGV: forget_ms -> {now, id1, beat1, id2, beat2, ...}
_LIST = (
    _NOW
    + """
local out = {now}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local beat = cjson.decode(all[i + 1])
  local last = tonumber(beat['gone_ms'] or beat['last_seen_ms'] or 0)
  if now - last > tonumber(ARGV[1]) then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
"""
)


@dataclass(slots=True, frozen=True)
class WorkerStatus:
    worker_id: str
    state: str  # one of STATES
    job_id: str | None  # the job it crawls, or crawled last
    pages_done: int
    current_host: str | None
    age_s: float  # since the last heartbeat
    gone_since: float | None  # Unix time (s) of the clean exit or of the last beat
    uptime_s: float = 0.0  # how long it has run (to its last beat, when gone)


class WorkerRegistry:
    """Heartbeats of workers, kept in one Redis hash."""

    def __init__(self, client: Redis, prefix: str = "trawler", health: ServiceHealth | None = None):
        self.redis = client
        self.health = health
        self._key = f"{prefix}:workers"
        self._beat = client.register_script(_BEAT)
        self._gone = client.register_script(_GONE)
        self._list = client.register_script(_LIST)

    async def heartbeat(
        self,
        worker_id: str,
        state: str,
        job_id: str | None,
        pages_done: int,
        current_host: str | None,
        uptime_s: float = 0.0,
    ) -> None:
        beat = {
            "job": job_id,
            "state": state,
            "pages_done": pages_done,
            "current_host": current_host,
            "uptime_s": round(uptime_s, 3),
        }
        args = [worker_id, json.dumps(beat)]
        await guarded(self.health, lambda: self._beat(keys=[self._key], args=args))

    async def mark_gone(self, worker_id: str) -> None:
        """A clean exit: listed as gone from now on (one attempt: the worker is leaving)."""
        await self._gone(keys=[self._key], args=[worker_id])

    async def list(self) -> list[WorkerStatus]:
        reply = await guarded(
            self.health, lambda: self._list(keys=[self._key], args=[_ms(FORGET_AFTER_S)])
        )
        now_ms, rest = int(reply[0]), reply[1:]
        found = [
            _status(_text(rest[i]), json.loads(rest[i + 1]), now_ms) for i in range(0, len(rest), 2)
        ]
        return sorted(found, key=lambda w: w.worker_id)


def _status(worker_id: str, beat: dict, now_ms: int) -> WorkerStatus:
    last_ms = int(beat["last_seen_ms"])
    state, gone_ms = beat.get("state", "live"), beat.get("gone_ms")
    if state != "gone" and now_ms - last_ms > _ms(GONE_AFTER_S):
        state, gone_ms = "gone", last_ms  # stopped beating: killed, or its machine lost
    age_s = (now_ms - last_ms) / 1000
    uptime_s = float(beat.get("uptime_s", 0.0)) + (age_s if state != "gone" else 0.0)
    return WorkerStatus(
        worker_id, state, beat.get("job"), int(beat.get("pages_done", 0)),
        beat.get("current_host"), age_s, None if gone_ms is None else gone_ms / 1000,
        round(uptime_s, 3),
    )  # fmt: skip


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
