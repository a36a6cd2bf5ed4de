-- reserve.lua takes stock for one reservation in a single atomic step.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 keys, 5 res, 6 unconfirmed,
--       7 the purchase token to spend (absent when the sale has none)
-- ARGV: 1 order id, 2 user id, 3 idempotency field ('' when the request has
--       no key), 4 first night, 5 nights, 6 rooms, 7 now (unix ms),
--       8 record without its active flag, 9 sold-out channel, 10 sale id,
--       11 when the token expires (unix ms, with KEYS[7]; '0' without),
--       12 the choices (flashsale.Reservation.Choices; absent: 1)
--
-- Reply (the names are redis/reply.go's, declared ahead of this script):
-- {OK, expire_ms, first night taken}, {EXISTING, order_id} for the key or id, {SOLD_OUT},
-- {LIMIT}, {NOT_LOADED}, {INVALID_STAY}, {TOKEN_SPENT}, {STALE} (the sale
-- came from another Redis process and is unloaded now: redis/reply.go),
-- {RULE, rule, night} a night's stay rule refuses the stay (flashsale.CheckStay;
-- the rules' fields are stayrules.lua's).
-- The token is spent after the idempotency check (a retry gets its order
-- back although its first attempt spent the token) and before every other
-- answer, which leave it spent, as a separate spend would.
-- Nights that this reservation leaves at 0 are published on the channel
-- from inside the script, so the broadcast is ordered with every other
-- change to the sale's stock.
local meta, refused = loaded(4, 'limit', 'expire', 'rules')
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
local choices = tonumber(ARGV[12] or '1')
if first < 0 or nights < 1 or rooms < 1 or first + nights > n or
    choices > 1 and (nights ~= 1 or first + choices > n) then
  return {INVALID_STAY}
end
if meta[4] and choices == 1 then
  -- The stay rules, judged as flashsale.CheckStay judges them: a closed
  -- night, then the arrival night's rules, then the departure.
  local f = {}
  for i = 0, nights do
    f[i + 1] = 'r' .. (first + i)
  end
  local r = redis.call('HMGET', KEYS[1], unpack(f))
  local function rule(j)
    if not r[j] then
      return 0, 0, 0
    end
    local lo, hi, flags = string.match(r[j], '(%d+) (%d+) (%d+)')
    return tonumber(lo), tonumber(hi), tonumber(flags)
  end
  for j = 1, nights do
    local _, _, flags = rule(j)
    if flags >= 4 then
      return {RULE, 'stop_sell', first + j - 1}
    end
  end
  local lo, hi, flags = rule(1)
  if flags % 2 == 1 then
    return {RULE, 'closed_to_arrival', first}
  elseif lo > 0 and nights < lo then
    return {RULE, 'min_stay', first}
  elseif hi > 0 and nights > hi then
    return {RULE, 'max_stay', first}
  end
  if first + nights < n then
    local _, _, dflags = rule(nights + 1)
    if dflags % 4 >= 2 then
      return {RULE, 'closed_to_departure', first + nights}
    end
  end
end
local held = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
if held + rooms > tonumber(meta[2]) then
  return {LIMIT}
end
local rec = ARGV[8]
if choices > 1 then
  -- The first of the choices with the rooms free; the record names it.
  local units = {}
  for i = 1, choices do
    units[i] = first + i - 1
  end
  local free = redis.call('HMGET', KEYS[2], unpack(units))
  local pick
  for i = 1, choices do
    if (tonumber(free[i]) or 0) >= rooms then
      pick = units[i]
      break
    end
  end
  if not pick then
    return {SOLD_OUT}
  end
  first = pick
  rec = string.gsub(rec, '^(|%d+|)%d+', '%1' .. first, 1)
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
redis.call('HSET', KEYS[5], ARGV[1], '1' .. rec)
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[1])
for i = 3, 6 do
  redis.call('PEXPIREAT', KEYS[i], meta[3])
end
if #zero > 0 then
  redis.call('PUBLISH', ARGV[9], 'z ' .. table.concat(zero, ',') .. ' ' .. ARGV[10])
end
return {OK, tonumber(meta[3]), first}
