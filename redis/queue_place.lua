-- queue_place.lua reads a user's place and marks them seen (Queue.Place).
--
-- KEYS: queue.lua's. ARGV: 1 user id, 2 at (unix ms).
--
-- Reply: {OK, view...}, or {} for a user who never joined.
fence()
local at = tonumber(ARGV[2])
lapse(at)
local rec = redis.call('HGET', PLACES, ARGV[1])
if not rec then
  return {}
end
local p = parse(rec)
p.seen = at
redis.call('HSET', PLACES, ARGV[1], format(p))
return {OK, unpack(view(p))}
