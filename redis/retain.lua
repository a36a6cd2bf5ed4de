-- retain.lua keeps a loaded sale's keys until a later expiry: an operator
-- moved the sale's end later, and its keys, set by load.lua to expire a day
-- after the end it had then, would otherwise vanish mid-sale (the fence
-- would take that for a lost sale and close it for a rebuild). It never
-- brings an expiry closer.
--
-- KEYS: 1 meta, 2 stock, 3 users, 4 keys, 5 res, 6 unconfirmed
-- ARGV: 1 expire_at ms, 2 ends_at ms
--
-- Reply (names from redis/reply.go): {OK, expire_at ms now in force},
-- {NOT_LOADED}, {STALE}.
local meta, refused = loaded(4, 'expire')
if not meta then
  return refused
end
local cur = tonumber(meta[2])
local want = tonumber(ARGV[1])
if want <= cur then
  return {OK, cur}
end
redis.call('HSET', KEYS[1], 'expire', ARGV[1], 'ends', ARGV[2])
for i = 1, 6 do
  redis.call('PEXPIREAT', KEYS[i], ARGV[1])
end
return {OK, want}
