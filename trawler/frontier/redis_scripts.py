"""Lua scripts of the Redis frontier: every scheduling step is one atomic script.

Times are Redis server milliseconds (``TIME``), so workers on different
machines agree on next-allowed times and lease expiries. Numbers that go back
into Redis are formatted with ``%.0f``: Lua 5.1 turns numbers into strings
with ``%.14g``, which would round depth*1e12 + sequence scores.

Key layout (see redis.py): ARGV[1] is the job prefix ``trawler:{job}:`` and
ARGV[2] the host prefix ``trawler:host:``, or a host bucket's two prefixes with
one hash tag on a Redis Cluster (redis_keys.py); per-host keys are built inside
the scripts from them, so every key a call touches is in the slot of the one key
it names, KEYS[1] (the bucket's ``ready``), by which the cluster routes it.

A queued URL is an entry (redis_codec.py: the URL, its parent, its 8-byte
fingerprint last) at the back of the LIST ``l:<depth>:<host>``; the ZSET
``d:<host>`` lists the depths that have such a list, so NEXT pops the front
of the lowest. Lists of short strings stay packed (listpack), a few bytes over
the entries' length, however long they grow; a ZSET member costs ~100 B more
beyond 128 members or 64 bytes. A URL handed back goes to the front of its
list. Older versions queued JSON members in the ZSET ``q:<host>``: NEXT takes
those first, so a job queued before an upgrade is crawled after it.

A lease is ``lease`` HASH key -> "worker depth host payload" plus ``lease_exp``
ZSET key -> expiry; the key is the entry's 8-byte fingerprint (the decimal one
of an older entry). ``requeued`` HASH names the leases that expired and went
back to a queue: a late acknowledgement takes such a URL out again (LREM, near
the front, or the whole list once if it was handed out again meanwhile), while
every other acknowledgement costs no queue search.

No script loops over the URLs of a job: COMMIT and SEEN over their arguments
(the Python side sends at most ``SCRIPT_CHUNK`` URLs a call), reclaim over
``reclaim_limit`` expired entries, RENEW and lease_clock over the URLs in
flight (workers x concurrency). A held host is its host HASH
(owner, job, until) plus the job's ``held`` ZSET host -> expiry, so that a
host whose worker died is freed when its hold expires.
"""

from trawler.frontier.redis_budget import BUDGET_LIB, PAGES
from trawler.frontier.redis_prelude import PRELUDE
from trawler.frontier.redis_revisits import TAKE_LIB
from trawler.frontier.redis_seen import SEEN, SEEN_LIB

# ARGV: jp, hp, job, worker, lease_ms, busy_retry_ms, reclaim_limit, gap_ms, max_crawl_delay_ms,
# revisits (1: the job's revisit lanes are read too), max_pages (0: none; redis_budget.py)
# -> {0[, URLs added]} done | {1, wait_ms} (-1: nothing ready)
# | {2, payload, host, depth, next, crawl_delay, health...}
NEXT = (
    PRELUDE
    + TAKE_LIB
    + BUDGET_LIB
    + """
local job, worker = ARGV[3], ARGV[4]
local lease_ms, busy_retry_ms = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
lease_clock(now, lease_ms)
reclaim(now, tonumber(ARGV[7]))
local spent = over_budget(tonumber(ARGV[11]))
if spent then return spent end
for _ = 1, 16 do
  local top = redis.call('ZRANGE', jp .. 'ready', 0, 0, 'WITHSCORES')
  if #top == 0 then
    if tonumber(redis.call('GET', jp .. 'queued') or 0) <= 0
        and redis.call('ZCARD', jp .. 'lease_exp') == 0
        and redis.call('ZCARD', jp .. 'delayed') == 0 then
      -- with the URLs ever added here: a sweep over buckets compares them (redis_sweep.py)
      return {0, redis.call('HGET', jp .. 'seenmeta', 'count') or '0'}
    end
    return {1, -1}
  end
  local host, score = top[1], tonumber(top[2])
  if score > now then return {1, score - now} end
  local hkey = hp .. host
  local h = redis.call('HMGET', hkey, 'owner', 'until', 'next', unpack(HEALTH))
  local next_at = tonumber(h[3] or 0)
  local held = h[1] and tonumber(h[2] or 0) > now
  if h[1] and not held then next_at = end_dead_hold(hkey) end
  if held then
    -- held by another job or by acquire_host: look again a little later
    redis.call('ZADD', jp .. 'ready', n2s(now + busy_retry_ms), host)
  elseif next_at > now then
    redis.call('ZADD', jp .. 'ready', n2s(next_at), host)
  else
    redis.call('ZREM', jp .. 'ready', host)
    local payload, depth, revisit = take(host, ARGV[10] == '1')
    if payload then
      if not revisit then redis.call('DECR', jp .. 'queued') end
      local expires = n2s(now + lease_ms)
      local gap = hold_gap(hkey, ARGV[8], ARGV[9])
      redis.call('HSET', hkey, 'owner', worker, 'job', job, 'until', expires, 'gap', gap)
      redis.call('ZADD', jp .. 'held', expires, host)
      local key = lease_key(payload)
      local entry = depth .. ' ' .. host .. ' ' .. payload
      redis.call('HSET', jp .. 'lease', key, worker .. ' ' .. entry)
      redis.call('ZADD', jp .. 'lease_exp', expires, key)
      return {2, payload, host, depth, next_at, h[4] or '', h[5] or '', h[6] or '', h[7] or ''}
    end
  end
end
return {1, 0}
"""
)

# ARGV: jp, hp, job, worker, lease_ms, host, gap_ms, max_crawl_delay_ms
# -> {1, next, crawl_delay, health...} | {0, wait_ms}
ACQUIRE = (
    PRELUDE
    + """
local job, worker, host = ARGV[3], ARGV[4], ARGV[6]
local now = now_ms()
local hkey = hp .. host
local h = redis.call('HMGET', hkey, 'owner', 'until', 'next', unpack(HEALTH))
if h[1] and tonumber(h[2] or 0) > now then return {0, tonumber(h[2]) - now} end
local next_at = tonumber(h[3] or 0)
if h[1] then next_at = end_dead_hold(hkey) end
local expires = n2s(now + tonumber(ARGV[5]))
local gap = hold_gap(hkey, ARGV[7], ARGV[8])
redis.call('HSET', hkey, 'owner', worker, 'job', job, 'until', expires, 'gap', gap)
redis.call('ZADD', jp .. 'held', expires, host)
redis.call('ZREM', jp .. 'ready', host)
return {1, next_at, h[4] or '', h[5] or '', h[6] or '', h[7] or ''}
"""
)

# ARGV: jp, hp, job, worker, host, next_ms, crawl_delay ('' = none, '-' = keep),
# backoff_s, failures, paused_ms
FINISH = (
    PRELUDE
    + """
local job, worker, host = ARGV[3], ARGV[4], ARGV[5]
local hkey = hp .. host
local h = redis.call('HMGET', hkey, 'next', 'owner', 'job')
local next_at = math.max(tonumber(h[1] or 0), tonumber(ARGV[6]))
redis.call('HSET', hkey, 'next', n2s(next_at), 'backoff', ARGV[8], 'failures', ARGV[9],
           'paused', ARGV[10])
if ARGV[7] ~= '-' then redis.call('HSET', hkey, 'crawl_delay', ARGV[7]) end
local ours = h[2] == worker
if ours then
  redis.call('HDEL', hkey, 'owner', 'job', 'until', 'gap')
  redis.call('ZREM', jp .. 'held', host)
end
-- a host taken over after our hold expired is scheduled by its new holder
if (ours or h[3] ~= job) and has_queued(host) then
  redis.call('ZADD', jp .. 'ready', n2s(next_at), host)
end
return 1
"""
)

# ARGV: jp, hp, job, worker, lease key, payload, host, depth, delay_ms
HAND_BACK = (
    PRELUDE
    + """
local job, worker, fp, payload, host = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local v = redis.call('HGET', jp .. 'lease', fp)
if not v or string.sub(v, 1, #worker + 1) ~= worker .. ' ' then return 0 end
redis.call('HDEL', jp .. 'lease', fp)
redis.call('ZREM', jp .. 'lease_exp', fp)
if is_revisit(payload) then  -- first in its host's lane again
  redis.call('LPUSH', jp .. 'r:' .. host, payload)
else
  push(host, ARGV[8], payload, true)
  redis.call('INCR', jp .. 'queued')
end
local next_at = math.max(host_next(host), now_ms() + tonumber(ARGV[9]))
redis.call('HSET', hp .. host, 'next', n2s(next_at))
if not held_by_job(hp .. host, job) then schedule(host, next_at) end
return 1
"""
)

# ARGV: jp, hp, job, worker, lease key, payload (attempts counted), host, depth, delay_ms
# The lease is dropped and the URL waits in ``delayed`` until due: it still
# counts as work in progress, and survives the worker.
RETRY_LATER = (
    PRELUDE
    + """
local worker, fp = ARGV[4], ARGV[5]
local v = redis.call('HGET', jp .. 'lease', fp)
if not v or string.sub(v, 1, #worker + 1) ~= worker .. ' ' then return 0 end
redis.call('HDEL', jp .. 'lease', fp)
redis.call('ZREM', jp .. 'lease_exp', fp)
local entry = ARGV[8] .. ' ' .. ARGV[7] .. ' ' .. ARGV[6]
redis.call('ZADD', jp .. 'delayed', n2s(now_ms() + tonumber(ARGV[9])), entry)
return 1
"""
)

# ARGV: jp, hp, job, seen base bits, max URLs a host (0: none; redis_budget.py), n_new,
# n_done, then n_new x (fp8, host, depth, payload), then n_done x (lease key, host,
# depth, payload). Re-running it changes nothing more: the seen set admits (or
# refuses) a URL once, an acknowledgement removes what is there. Returns {URLs
# added, URLs refused for their host's budget}.
COMMIT = (
    PRELUDE
    + SEEN_LIB
    + BUDGET_LIB
    + """
local job, n_new, n_done = ARGV[3], tonumber(ARGV[6]), tonumber(ARGV[7])
local max_per_host = tonumber(ARGV[5])
local s = seen_state(ARGV[4])
local added, refused, touched = 0, 0, {}
for i = 0, n_new - 1 do
  local fp8, host = ARGV[8 + 4 * i], ARGV[9 + 4 * i]
  local room = host_has_room(host, max_per_host)
  if redis.call('HSETNX', seen_bucket(s, fp8), seen_field(s, fp8), '') == 1 then
    if room then
      push(host, ARGV[10 + 4 * i], ARGV[11 + 4 * i], false)
      host_admit(host, max_per_host)
      added = added + 1
      touched[host] = true
    else
      refused = refused + 1  -- seen from now on: refused and counted once (redis_budget.py)
    end
  end
end
seen_grow(s, added + refused)
if added > 0 then redis.call('INCRBY', jp .. 'queued', added) end
if refused > 0 then redis.call('INCRBY', jp .. 'host_budget_refused', refused) end
for host in pairs(touched) do
  if not held_by_job(hp .. host, job) then schedule(host, host_next(host)) end
end
local base = 8 + 4 * n_new
local requeued = n_done > 0 and redis.call('EXISTS', jp .. 'requeued') == 1
for i = 0, n_done - 1 do
  local fp, host = ARGV[base + 4 * i], ARGV[base + 1 + 4 * i]
  local depth, payload = ARGV[base + 2 + 4 * i], ARGV[base + 3 + 4 * i]
  redis.call('HDEL', jp .. 'lease', fp)
  redis.call('ZREM', jp .. 'lease_exp', fp)
  -- re-queued after its lease expired, but its page is stored now: drop it
  if requeued and redis.call('HDEL', jp .. 'requeued', fp) == 1 then
    local gone = redis.call('LREM', qkey(host, depth), 1, payload)
    if string.sub(payload, 1, 1) == '[' then
      gone = gone + redis.call('ZREM', jp .. 'q:' .. host, payload)
    end
    if gone > 0 then redis.call('DECR', jp .. 'queued') end
  end
end
return {added, refused}
"""
)

# ARGV: jp, hp, job, worker, lease_ms, n_fps, fps..., hosts...
RENEW = (
    PRELUDE
    + """
local worker, n_fps = ARGV[4], tonumber(ARGV[6])
local now = now_ms()
lease_clock(now, tonumber(ARGV[5]))
local expires = n2s(now + tonumber(ARGV[5]))
for i = 7, 6 + n_fps do
  local v = redis.call('HGET', jp .. 'lease', ARGV[i])
  if v and string.sub(v, 1, #worker + 1) == worker .. ' ' then
    redis.call('ZADD', jp .. 'lease_exp', 'XX', expires, ARGV[i])
  end
end
for i = 7 + n_fps, #ARGV do
  if redis.call('HGET', hp .. ARGV[i], 'owner') == worker then
    redis.call('HSET', hp .. ARGV[i], 'until', expires)
    redis.call('ZADD', jp .. 'held', 'XX', expires, ARGV[i])
  end
end
return 1
"""
)

SCRIPTS = {
    "NEXT": NEXT,
    "ACQUIRE": ACQUIRE,
    "FINISH": FINISH,
    "HAND_BACK": HAND_BACK,
    "RETRY_LATER": RETRY_LATER,
    "COMMIT": COMMIT,
    "RENEW": RENEW,
    "SEEN": SEEN,
    "PAGES": PAGES,
}
