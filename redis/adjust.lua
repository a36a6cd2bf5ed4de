-- adjust.lua adds units to one night of a loaded sale, or takes them away
-- when the delta is negative and that many are available: an operator's
-- rooms released mid-sale, or taken back. It broadcasts the night's change
-- across zero like reserve.lua and release.lua do, so every engine's
-- sold-out flags follow.
--
-- KEYS: 1 meta, 2 stock
-- ARGV: 1 night index, 2 delta, 3 sold-out channel, 4 sale id
--
-- Reply: {OK, left} done, {SOLD_OUT, available} too few units to take,
-- {INVALID_STAY} no such night, {NOT_LOADED}, {STALE}.
local meta, refused = loaded(1)
if not meta then
  return refused
end
local night = tonumber(ARGV[1])
if night < 0 or night >= tonumber(meta[1]) then
  return {INVALID_STAY}
end
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local delta = tonumber(ARGV[2])
if delta < 0 and cur + delta < 0 then
  return {SOLD_OUT, cur}
end
local left = redis.call('HINCRBY', KEYS[2], ARGV[1], delta)
if left > 0 and cur <= 0 then
  redis.call('PUBLISH', ARGV[3], 'b ' .. ARGV[1] .. ' ' .. ARGV[4])
elseif left <= 0 and cur > 0 then
  redis.call('PUBLISH', ARGV[3], 'z ' .. ARGV[1] .. ' ' .. ARGV[4])
end
return {OK, left}
