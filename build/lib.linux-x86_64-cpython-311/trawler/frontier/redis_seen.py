"""The distributed frontier's URL-seen set: Lua shared by COMMIT (add) and SEEN (look up).

An exact set of 64-bit fingerprints in Redis HASH buckets, each kept under
128 fields so that Redis stores it packed (listpack: ~12 B a URL, 6 bytes of
fingerprint plus a few of framing; a bucket converted to a hashtable costs
~51 B a URL). A fixed number of buckets cannot do that: 65,536 of them hold
8.4 M URLs before they convert, and at a million URLs more buckets would cost
more in per-key overhead than the URLs themselves.

So the buckets grow by linear hashing. A bucket is named by the first ``bits``
bits of the fingerprint. ``seenmeta`` holds ``base`` (16), ``level``, ``split``
and ``count``: buckets below ``split`` have been split into two of
``base + level + 1`` bits, the others still have ``base + level``. When
``count`` exceeds ``SEEN_FILL`` URLs a bucket on average, COMMIT splits the
next bucket (moving its ≤ 128 fields); a round of splits doubles the buckets.
Every call does bounded work: each split moves one bucket, and splits follow
the URLs added (one per ``SEEN_FILL``).

A field is the fingerprint less its first 2 bytes (every bucket of 16 bits or
more shares them). The 16-bit buckets keep their original names
``seen:<hhhh>``, so a job started by an older version keeps its seen set (its
URLs seen before the upgrade are not counted: its buckets split later).
``base`` below 16 exists for tests, which would otherwise need millions of URLs
to see a split: fields are then the whole fingerprint.
"""

from __future__ import annotations

SEEN_BASE_BITS = 16

# Needs ``jp`` (the job prefix). ``s`` is the state read by seen_state.
SEEN_LIB = """
local SEEN_FILL = 64
local seen_meta = jp .. 'seenmeta'
local function seen_state(default_base)
  local m = redis.call('HMGET', seen_meta, 'base', 'level', 'split', 'count')
  return {base = tonumber(m[1] or default_base), level = tonumber(m[2] or 0),
          split = tonumber(m[3] or 0), count = tonumber(m[4] or 0)}
end
-- the first `bits` bits (at most 32) of an 8-byte fingerprint, as a number
local function top_bits(fp, bits)
  local b1, b2, b3, b4 = string.byte(fp, 1, 4)
  return math.floor((((b1 * 256 + b2) * 256 + b3) * 256 + b4) / 2 ^ (32 - bits))
end
local function seen_key(bits, idx)
  if bits == 16 then return jp .. 'seen:' .. string.format('%04x', idx) end
  return jp .. 'seen:' .. bits .. ':' .. string.format('%x', idx)
end
local function seen_field(s, fp)
  if s.base >= 16 then return string.sub(fp, 3) end
  return fp
end
local function seen_bucket(s, fp)
  local bits = s.base + s.level
  local idx = top_bits(fp, bits)
  if idx < s.split then
    bits = bits + 1
    idx = top_bits(fp, bits)
  end
  return seen_key(bits, idx)
end
-- Split bucket `split` of `bits` bits into the two of bits + 1 it becomes.
local function seen_split(s)
  local bits = s.base + s.level
  local from = seen_key(bits, s.split)
  local shared = ''
  if s.base >= 16 then
    local top16 = math.floor(s.split / 2 ^ (bits - 16))
    shared = string.char(math.floor(top16 / 256), top16 % 256)
  end
  local halves = {{}, {}}
  for _, field in ipairs(redis.call('HKEYS', from)) do
    local half = halves[top_bits(shared .. field, bits + 1) % 2 + 1]
    half[#half + 1] = field
    half[#half + 1] = ''
  end
  for i, half in ipairs(halves) do
    if #half > 0 then redis.call('HSET', seen_key(bits + 1, 2 * s.split + i - 1), unpack(half)) end
  end
  redis.call('DEL', from)
  s.split = s.split + 1
  if s.split == 2 ^ bits then
    s.level, s.split = s.level + 1, 0
  end
end
-- After `added` URLs were added: split until the buckets hold SEEN_FILL on average.
local function seen_grow(s, added)
  if added == 0 then return end
  s.count = s.count + added
  while s.count > SEEN_FILL * (2 ^ (s.base + s.level) + s.split) and s.base + s.level < 31 do
    seen_split(s)
  end
  redis.call('HSET', seen_meta, 'base', s.base, 'level', s.level, 'split', s.split,
             'count', s.count)
end
"""

# ARGV: jp, base bits, fingerprints (8 bytes each) -> list of 0/1 (1 = seen)
SEEN = (
    """
local jp = ARGV[1]
"""
    + SEEN_LIB
    + """
local s = seen_state(ARGV[2])
local out = {}
for i = 3, #ARGV do
  out[i - 2] = redis.call('HEXISTS', seen_bucket(s, ARGV[i]), seen_field(s, ARGV[i]))
end
return out
"""
)
