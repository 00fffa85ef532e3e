"""The Lua functions every frontier script starts with (redis_scripts.py, and
redis_reserve.py's): the key prefixes from ARGV, Redis server time, a host's
schedule, queues and holds, lease entries, and the lease clock that pushes leases
and holds back through an outage. The key layout is redis_scripts.py's docstring.
"""

PRELUDE = """
local jp, hp = ARGV[1], ARGV[2]
local function n2s(x) return string.format('%.0f', x) end
-- a held host's state as the worker gets it (and gives it back at finish)
local HEALTH = {'crawl_delay', 'backoff', 'failures', 'paused'}
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function held_by_job(hkey, job)
  local h = redis.call('HMGET', hkey, 'owner', 'job')
  return h[1] and h[2] == job
end
local function schedule(host, score)
  redis.call('ZADD', jp .. 'ready', 'NX', n2s(score), host)
end
local function host_next(host)
  return tonumber(redis.call('HGET', hp .. host, 'next') or 0)
end
-- The interval a holder keeps with its hold (politeness.interval_s: the job's
-- --delay plus margin, the capped Crawl-delay, the back-off), for end_dead_hold.
local function hold_gap(hkey, base_ms, max_crawl_delay_ms)
  local h = redis.call('HMGET', hkey, 'crawl_delay', 'backoff')
  local crawl_delay_ms = math.min((tonumber(h[1]) or 0) * 1000, tonumber(max_crawl_delay_ms))
  return n2s(math.max(tonumber(base_ms), crawl_delay_ms) + (tonumber(h[2]) or 0) * 1000)
end
-- A hold that expired: its worker died (or stalled) and may have sent a request
-- that it never recorded, at the latest when the hold ended: space from there.
local function end_dead_hold(hkey)
  local h = redis.call('HMGET', hkey, 'next', 'until', 'gap')
  local next_at = math.max(tonumber(h[1] or 0), tonumber(h[2] or 0) + tonumber(h[3] or 0))
  redis.call('HSET', hkey, 'next', n2s(next_at))
  redis.call('HDEL', hkey, 'owner', 'job', 'until', 'gap')
  return next_at
end
local function qkey(host, depth) return jp .. 'l:' .. depth .. ':' .. host end
-- A URL joins its host's queue: at the back, or again at the front of its depth.
-- A depth stays in d:<host> until a pop finds its list gone (one command less a URL).
local function push(host, depth, payload, again)
  if redis.call(again and 'LPUSH' or 'RPUSH', qkey(host, depth), payload) == 1 then
    redis.call('ZADD', jp .. 'd:' .. host, 'NX', depth, depth)
  end
end
local function has_queued(host)  -- new URLs or due revisits (redis_revisits.py)
  return redis.call('EXISTS', jp .. 'd:' .. host, jp .. 'q:' .. host, jp .. 'r:' .. host) > 0
end
local function is_revisit(payload) return string.byte(payload, 1) == 1 end
-- The front URL of the host's lowest depth: payload, depth; nil when none.
-- (Loops over the host's depths, at most max_depth + 1.) URLs an older version
-- queued come after the new ones: only while a job crawls through an upgrade.
local function pop(host)
  local dkey = jp .. 'd:' .. host
  while true do
    local depth = redis.call('ZRANGE', dkey, 0, 0)[1]
    if not depth then break end
    local payload = redis.call('LPOP', qkey(host, depth))
    if payload then return payload, depth end
    redis.call('ZREM', dkey, depth)
  end
  local old = redis.call('ZPOPMIN', jp .. 'q:' .. host)
  if #old > 0 then return old[1], string.format('%d', math.floor(old[2] / 1e12)) end
  return nil
end
local function lease_key(payload)
  if string.sub(payload, 1, 1) == '[' then return string.match(payload, '^%["(%-?%d+)"') end
  return string.sub(payload, -8)
end
-- "depth host payload" of a lease or a delayed URL -> host, depth, payload
-- (a JSON member of an older version carries its own host and depth)
local function unpack_entry(e)
  if string.sub(e, 1, 1) == '[' then
    local r = cjson.decode(e)
    return r[3], string.format('%d', r[2]), e
  end
  local a = string.find(e, ' ', 1, true)
  local b = string.find(e, ' ', a + 1, true)
  return string.sub(e, a + 1, b - 1), string.sub(e, 1, a - 1), string.sub(e, b + 1)
end
-- A URL goes back to the front of its depth level in its host's queue.
local function requeue(entry, now)
  local host, depth, payload = unpack_entry(entry)
  push(host, depth, payload, true)
  redis.call('INCR', jp .. 'queued')
  if not held_by_job(hp .. host, ARGV[3]) then schedule(host, math.max(now, host_next(host))) end
end
-- Lease time runs only while the job's frontier is in use. Every live worker
-- of the job runs NEXT or RENEW at least every lease/3, so a longer gap since
-- the last one means nobody could reach Redis (it was down, or every worker
-- was cut off): the job's leases and host holds are pushed back by the gap.
-- A live worker keeps its URLs and hosts through an outage of any length,
-- instead of finding them handed to another worker; a dead worker's still
-- expire one lease after the frontier is in use again.
local function lease_clock(now, lease_ms)
  local last = tonumber(redis.call('GET', jp .. 'clock') or 0)
  local gap = now - last
  -- written at most once a second: the gap that matters is seconds long
  if gap >= 1000 then redis.call('SET', jp .. 'clock', n2s(now)) end
  if last == 0 then return end
  if gap <= math.max(lease_ms / 2, 5000) then return end
  for _, zkey in ipairs({'lease_exp', 'held'}) do
    local items = redis.call('ZRANGE', jp .. zkey, 0, -1, 'WITHSCORES')
    for i = 1, #items, 2 do
      local expires = n2s(tonumber(items[i + 1]) + gap)
      redis.call('ZADD', jp .. zkey, 'XX', expires, items[i])
      if zkey == 'held' and redis.call('HGET', hp .. items[i], 'job') == ARGV[3] then
        redis.call('HSET', hp .. items[i], 'until', expires)
      end
    end
  end
end
-- Expired URL leases and due retries go back to their host's queue, expired
-- host holds are released; either way the host becomes schedulable again.
local function reclaim(now, limit)
  local fps = redis.call('ZRANGEBYSCORE', jp .. 'lease_exp', '-inf', n2s(now), 'LIMIT', 0, limit)
  for _, fp in ipairs(fps) do
    local v = redis.call('HGET', jp .. 'lease', fp)
    redis.call('HDEL', jp .. 'lease', fp)
    redis.call('ZREM', jp .. 'lease_exp', fp)
    local entry = v and string.sub(v, string.find(v, ' ', 1, true) + 1)
    if entry and is_revisit(select(3, unpack_entry(entry))) then
      -- its page stays due in PostgreSQL unless its visit was committed: fed again
      -- from there (redis_revisits.py), never queued again here
      redis.call('HDEL', jp .. 'rpending', fp)
    elseif entry then
      requeue(entry, now)
      redis.call('HSET', jp .. 'requeued', fp, 1)
    end
  end
  local due = redis.call('ZRANGEBYSCORE', jp .. 'delayed', '-inf', n2s(now), 'LIMIT', 0, limit)
  for _, payload in ipairs(due) do
    redis.call('ZREM', jp .. 'delayed', payload)
    requeue(payload, now)
  end
  local hosts = redis.call('ZRANGEBYSCORE', jp .. 'held', '-inf', n2s(now), 'LIMIT', 0, limit)
  for _, host in ipairs(hosts) do
    redis.call('ZREM', jp .. 'held', host)
    local hkey = hp .. host
    local h = redis.call('HMGET', hkey, 'job', 'until')
    if h[1] == ARGV[3] and tonumber(h[2] or 0) <= now then end_dead_hold(hkey) end
    if has_queued(host) then
      schedule(host, math.max(now, host_next(host)))
    end
  end
end
"""
