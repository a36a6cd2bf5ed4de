-- queue_use.lua spends a user's admission (Queue.Use).
--
-- KEYS: queue.lua's. ARGV: 1 user id, 2 at (unix ms).
--
-- Reply: 1 if the admission is spent (now or before), 0 if the user has
-- none live.
fence()
lapse(tonumber(ARGV[2]))
local rec = redis.call('HGET', PLACES, ARGV[1])
if not rec then
  return 0
end
local p = parse(rec)
if p.state == 'u' then
  return 1
end
if p.state ~= 'a' then
  return 0
end
p.state = 'u'
redis.call('HSET', PLACES, ARGV[1], format(p))
redis.call('ZREM', LIVE, ARGV[1])
redis.call('HINCRBY', QUEUE, 'used', 1)
return 1
