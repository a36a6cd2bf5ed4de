-- release.lua gives an active reservation's units back and frees the
-- user's limit. A reservation that is not active (or unknown) is left alone,
-- so releasing twice is harmless. The idempotency key stays bound. A
-- pinned reservation (active flag '2', set by retake.lua on an active one:
-- a payment took the order back before this release ran) is unpinned and
-- keeps its units: this release was decided before the payment.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 res, 5 unconfirmed
-- ARGV: 1 order id, 2 sold-out channel, 3 sale id
--
-- Reply (names from redis/reply.go): {OK, nights_back_csv} released,
-- {INACTIVE} nothing to do, {NOT_LOADED}, {STALE}.
local meta, refused = loaded(3)
if not meta then
  return refused
end
local v = redis.call('HGET', KEYS[4], ARGV[1])
if v and string.sub(v, 1, 1) == '2' then
  redis.call('HSET', KEYS[4], ARGV[1], '1' .. string.sub(v, 2))
  return {INACTIVE}
end
if not v or string.sub(v, 1, 1) ~= '1' then
  return {INACTIVE}
end
local rooms, first, nights, ulen, pos = string.match(v, '^1|(%d+)|(%d+)|(%d+)|%-?%d+|%-?%d+|(%d+)|()')
rooms, first, nights, ulen = tonumber(rooms), tonumber(first), tonumber(nights), tonumber(ulen)
local user = string.sub(v, pos, pos + ulen - 1)
local back = {}
for i = first, first + nights - 1 do
  local left = redis.call('HINCRBY', KEYS[2], i, rooms)
  if left > 0 and left - rooms <= 0 then
    back[#back + 1] = i
  end
end
if redis.call('HINCRBY', KEYS[3], user, -rooms) <= 0 then
  redis.call('HDEL', KEYS[3], user)
end
redis.call('HSET', KEYS[4], ARGV[1], '0' .. string.sub(v, 2))
redis.call('ZREM', KEYS[5], ARGV[1])
local csv = table.concat(back, ',')
if #back > 0 then
  redis.call('PUBLISH', ARGV[2], 'b ' .. csv .. ' ' .. ARGV[3])
end
return {OK, csv}
