-- load.lua commits a sale staged into temporary keys: it swaps them in with
-- RENAME so a reader sees either the old sale or the whole new one. It
-- refuses, dropping the staging, when the sale is loaded and has started at
-- now (passed in, never read from the server clock). A sale loaded by
-- another Redis process (stale, redis/reply.go) counts as not loaded. The
-- meta hash is stamped with this process's run_id, and each of the sale's
-- hashes gets the sentinel field '' that every script checks.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 keys, 5 res, 6 unconfirmed,
--       7 staged stock, 8 staged users, 9 staged keys, 10 staged res
-- ARGV: 1 now (unix ms), 2 starts_at ms, 3 ends_at ms, 4 per-user limit,
--       5 hold seconds, 6 nights, 7 expire_at ms, 8 sold-out channel, 9 sale id,
--       then the stay rules' meta fields as pairs (stayrules.lua), if any
--
-- Reply (names from redis/reply.go): {OK} loaded, {STARTED} already
-- started, {STAGING_LOST}.
local cur = redis.call('HMGET', KEYS[1], 'starts', 'node')
local starts = cur[1]
if starts and stale(KEYS[1], cur[2]) then
  starts = nil
end
if starts and tonumber(ARGV[1]) >= tonumber(starts) then
  redis.call('DEL', KEYS[7], KEYS[8], KEYS[9], KEYS[10])
  return {STARTED}
end
if redis.call('EXISTS', KEYS[7]) == 0 then
  redis.call('DEL', KEYS[8], KEYS[9], KEYS[10])
  return {STAGING_LOST}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
for i = 2, 5 do
  if redis.call('EXISTS', KEYS[i + 5]) == 1 then
    redis.call('RENAME', KEYS[i + 5], KEYS[i])
  end
  redis.call('HSET', KEYS[i], '', '1') -- the sentinel (redis/reply.go)
  redis.call('PEXPIREAT', KEYS[i], ARGV[7])
end
redis.call('HSET', KEYS[1], 'starts', ARGV[2], 'ends', ARGV[3], 'limit', ARGV[4],
  'hold', ARGV[5], 'nights', ARGV[6], 'expire', ARGV[7], 'node', node())
if #ARGV > 9 then
  redis.call('HSET', KEYS[1], 'rules', '1', unpack(ARGV, 10))
end
redis.call('PEXPIREAT', KEYS[1], ARGV[7])
local zero = {}
for i = 0, tonumber(ARGV[6]) - 1 do
  if (tonumber(redis.call('HGET', KEYS[2], i)) or 0) <= 0 then
    zero[#zero + 1] = i
  end
end
redis.call('PUBLISH', ARGV[8], 'l - ' .. ARGV[9])
if #zero > 0 then
  redis.call('PUBLISH', ARGV[8], 'z ' .. table.concat(zero, ',') .. ' ' .. ARGV[9])
end
return {OK}
