-- read.lua reads a sale's units left per night and, with ARGV[1] = '1',
-- every reservation record, in one atomic step (an audit comparing them
-- with the database must not see a reserve half-applied), after the stale
-- check every script makes (redis/reply.go).
--
-- KEYS: 1 meta, 2 stock, 3 res
-- ARGV: 1 '1' to read the records too
--
-- Reply: {OK, nights, {night, units, ...}, {order id, record, ...}},
-- {NOT_LOADED}, {STALE}.
local meta, refused = loaded(2)
if not meta then
  return refused
end
local res = {}
if ARGV[1] == '1' then
  res = redis.call('HGETALL', KEYS[3])
end
return {OK, tonumber(meta[1]), redis.call('HGETALL', KEYS[2]), res}
