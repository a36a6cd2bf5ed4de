-- retake.lua reactivates a released reservation (payment arrived after the
-- hold expired) with the same limit and stock checks as reserve.lua.
--
-- A reservation retaken from released goes back into the outbox (KEYS[5],
-- scored now): the retry of a 202 whose publish failed retakes it and
-- publishes it again, and if that publish's outcome is lost, only the
-- outbox lets the relay find it. Before, release.lua had taken it out and
-- nothing put it back: the relay never republished it (CI,
-- TestFaultBrokerCutTwice, 9 and 12 of 400 202s). An order the database
-- already has (a late payment) is then published once more, a duplicate
-- the consumer acknowledges.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 res, 5 unconfirmed
-- ARGV: 1 order id, 2 sold-out channel, 3 sale id, 4 now (unix ms)
--
-- Reply (names from redis/reply.go): {OK} active (retaken now or already),
-- {SOLD_OUT}, {LIMIT}, {NOT_LOADED}, {UNKNOWN_ORDER}, {STALE}.
local meta, refused = loaded(3, 'limit', 'expire')
if not meta then
  return refused
end
local v = redis.call('HGET', KEYS[4], ARGV[1])
if not v then
  return {UNKNOWN_ORDER}
end
if string.sub(v, 1, 1) == '1' then
  -- Active: a release may be on its way (the hold expired in the
  -- database, the engine has not heard yet). Pin it, so that release
  -- keeps these units for the payment that retakes them.
  redis.call('HSET', KEYS[4], ARGV[1], '2' .. string.sub(v, 2))
  return {OK}
end
if string.sub(v, 1, 1) == '2' then
  return {OK}
end
local rooms, first, nights, ulen, pos = string.match(v, '^0|(%d+)|(%d+)|(%d+)|%-?%d+|%-?%d+|(%d+)|()')
rooms, first, nights, ulen = tonumber(rooms), tonumber(first), tonumber(nights), tonumber(ulen)
local user = string.sub(v, pos, pos + ulen - 1)
local held = tonumber(redis.call('HGET', KEYS[3], user) or '0')
if held + rooms > tonumber(meta[2]) then
  return {LIMIT}
end
for i = first, first + nights - 1 do
  if (tonumber(redis.call('HGET', KEYS[2], i)) or 0) < rooms then
    return {SOLD_OUT}
  end
end
local zero = {}
for i = first, first + nights - 1 do
  if redis.call('HINCRBY', KEYS[2], i, -rooms) <= 0 then
    zero[#zero + 1] = i
  end
end
redis.call('HINCRBY', KEYS[3], user, rooms)
redis.call('PEXPIREAT', KEYS[3], meta[3])
redis.call('HSET', KEYS[4], ARGV[1], '1' .. string.sub(v, 2))
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
redis.call('PEXPIREAT', KEYS[5], meta[3])
if #zero > 0 then
  redis.call('PUBLISH', ARGV[2], 'z ' .. table.concat(zero, ',') .. ' ' .. ARGV[3])
end
return {OK}
