-- stayrules.lua replaces a loaded sale's stay rules (flashsale.StayRules) in
-- one step: every reserve.lua that runs after it judges by them. They live
-- in the meta hash, one field 'r<night>' per night that has any, valued
-- '<min> <max> <flags>' (flags: 1 closed to arrival, 2 closed to
-- departure, 4 stop-sell), and the field 'rules' = '1' while any does, so a
-- sale without rules costs reserve.lua nothing.
--
-- KEYS: 1 meta
-- ARGV: 1 the sale's nights as the caller knows them ('' with no rules),
--       then field/value pairs
--
-- Reply (names from redis/reply.go): {OK}, {INVALID_STAY} the caller's
-- nights are not the loaded sale's, {NOT_LOADED}, {STALE}.
local meta, refused = loaded(0)
if not meta then
  return refused
end
local n = tonumber(meta[1])
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= n then
  return {INVALID_STAY}
end
local old = {'rules'}
for i = 0, n - 1 do
  old[#old + 1] = 'r' .. i
end
redis.call('HDEL', KEYS[1], unpack(old))
if #ARGV > 1 then
  redis.call('HSET', KEYS[1], 'rules', '1', unpack(ARGV, 2))
end
return {OK}
