-- flakestream sequencer: reserve up to n sequence numbers of one millisecond
-- for one (server, worker) pair, atomically, by Redis's own clock.
--
-- KEYS[1]  hash {ms, seq}: the last millisecond and sequence this pair issued
-- KEYS[2]  hash {id, epoch, shift, floor, hi}: the layout in force, the first
--          millisecond it may issue in, and the highest millisecond issued
-- ARGV     n, max sequence, layout id, epoch ms, time shift, max adopt wait ms
--
-- Replies
--   {1, ms, first, count}   a block: sequences first..first+count-1 of ms
--   {0, wait_us}            nothing now: the millisecond is full, or this
--                           pair's last millisecond (or the layout floor) is
--                           still ahead of the clock; ask again after wait_us
--   {-1, floor_ms, old_id}  a layout change refused: it could issue no number
--                           above those already issued before floor_ms
--
-- Why it never issues a number twice: the clock is Redis TIME, one clock for
-- every client, so client skew and pauses do not matter; the state is kept
-- with no expiry, and the script never issues below it, so a clock that steps
-- back (or a restart, or a slow client) waits instead of reusing a
-- millisecond. The keys share a hash tag, so on Redis Cluster they live in
-- one slot and this script runs on one node, serialized with every other
-- reservation. The Go MemorySequencer follows the same rules.
pcall(redis.replicate_commands) -- needed before Redis 5 to call TIME before a write; a no-op since

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local n = tonumber(ARGV[1])
local max_seq = tonumber(ARGV[2])

local lay = redis.call('HMGET', KEYS[2], 'id', 'epoch', 'shift', 'floor', 'hi')
local floor = tonumber(lay[4]) or 0
local hi = tonumber(lay[5]) or 0
if lay[1] ~= ARGV[3] then
  -- A new layout. Every number issued so far has its time at or below b, so
  -- under the old layout it is at most compose(b, all ones). Start the new
  -- layout at the first millisecond whose smallest number is above that.
  local f = 0
  if lay[1] then
    local b = math.max(now, hi, floor)
    local e = math.max(b - tonumber(lay[2]), 0)
    local old_shift, new_shift = tonumber(lay[3]), tonumber(ARGV[5])
    local q
    if old_shift >= new_shift then
      local m = 2 ^ (old_shift - new_shift)
      q = e * m + m - 1
    else
      q = math.floor(e / 2 ^ (new_shift - old_shift))
    end
    f = math.max(tonumber(ARGV[4]) + q + 1, b + 1)
    if f - now > tonumber(ARGV[6]) then
      return {-1, f, lay[1]}
    end
  end
  redis.call('HSET', KEYS[2], 'id', ARGV[3], 'epoch', ARGV[4], 'shift', ARGV[5], 'floor', string.format('%d', f))
  floor = f
end

local st = redis.call('HMGET', KEYS[1], 'ms', 'seq')
local ms = tonumber(st[1]) or -1
local seq = tonumber(st[2]) or -1
local target = math.max(ms, floor)
if now < target then
  return {0, target * 1000 - now_us}
end
local first = 0
if now == ms then
  if seq >= max_seq then
    return {0, (now + 1) * 1000 - now_us}
  end
  first = seq + 1
end
local count = math.min(n, max_seq - first + 1)
redis.call('HSET', KEYS[1], 'ms', string.format('%d', now), 'seq', string.format('%d', first + count - 1))
if now > hi then
  redis.call('HSET', KEYS[2], 'hi', string.format('%d', now))
end
return {1, now, first, count}
