-- reserve.lua takes stock for one reservation in a single atomic step.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 keys, 5 res, 6 unconfirmed,
--       7 the purchase token to spend (absent when the sale has none)
-- ARGV: 1 order id, 2 user id, 3 idempotency field ('' when the request has
--       no key), 4 first night, 5 nights, 6 rooms, 7 now (unix ms),
--       8 record without its active flag, 9 sold-out channel, 10 sale id,
--       11 when the token expires (unix ms, with KEYS[7])
--
-- Reply (the names are redis/reply.go's, declared ahead of this script):
-- {OK, expire_ms}, {EXISTING, order_id} for the key or id, {SOLD_OUT},
-- {LIMIT}, {NOT_LOADED}, {INVALID_STAY}, {TOKEN_SPENT}, {STALE} (the sale
-- came from another Redis process and is unloaded now: redis/reply.go).
-- The token is spent after the idempotency check (a retry gets its order
-- back although its first attempt spent the token) and before every other
-- answer, which leave it spent, as a separate spend would.
-- Nights that this reservation leaves at 0 are published on the channel
-- from inside the script, so the broadcast is ordered with every other
-- change to the sale's stock.
local meta, refused = loaded(4, 'limit', 'expire')
if not meta then
  return refused
end
if ARGV[3] ~= '' then
  local existing = redis.call('HGET', KEYS[4], ARGV[3])
  if existing then
    return {EXISTING, existing}
  end
end
if redis.call('HEXISTS', KEYS[5], ARGV[1]) == 1 then
  return {EXISTING, ARGV[1]}
end
if KEYS[7] and not redis.call('SET', KEYS[7], '1', 'NX', 'PXAT', ARGV[11]) then
  return {TOKEN_SPENT}
end
local n = tonumber(meta[1])
local first = tonumber(ARGV[4])
local nights = tonumber(ARGV[5])
local rooms = tonumber(ARGV[6])
if first < 0 or nights < 1 or rooms < 1 or first + nights > n then
  return {INVALID_STAY}
end
local held = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
if held + rooms > tonumber(meta[2]) then
  return {LIMIT}
end
local idx = {}
for i = 1, nights do
  idx[i] = first + i - 1
end
local avail = redis.call('HMGET', KEYS[2], unpack(idx))
for i = 1, nights do
  if (tonumber(avail[i]) or 0) < rooms then
    return {SOLD_OUT}
  end
end
local zero = {}
for i = 1, nights do
  if redis.call('HINCRBY', KEYS[2], idx[i], -rooms) <= 0 then
    zero[#zero + 1] = idx[i]
  end
end
redis.call('HINCRBY', KEYS[3], ARGV[2], rooms)
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[1])
end
redis.call('HSET', KEYS[5], ARGV[1], '1' .. ARGV[8])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[1])
for i = 3, 6 do
  redis.call('PEXPIREAT', KEYS[i], meta[3])
end
if #zero > 0 then
  redis.call('PUBLISH', ARGV[9], 'z ' .. table.concat(zero, ',') .. ' ' .. ARGV[10])
end
return {OK, tonumber(meta[3])}
