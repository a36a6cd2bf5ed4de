-- queue_join.lua gives a user a place in the queue (Queue.Join).
--
-- KEYS: queue.lua's. ARGV: 1 user id, 2 at (unix ms), 3 a new ticket (used
-- only for a first place; the queue's first is its epoch, which tells the
-- draw that the queue it read is the one it writes), 4 the keys' time to
-- live (ms).
--
-- Reply: {OK, view...} for a new place (or an expired one joined again
-- at the back, under its ticket), {EXISTING, view...} for the place the
-- user has, {SOLD_OUT} for a user without one while the queue is sold out.
fence()
local at = tonumber(ARGV[2])
lapse(at)
local rec = redis.call('HGET', PLACES, ARGV[1])
local p
if rec then
  p = parse(rec)
  if p.state ~= 'e' then
    p.seen = at
    redis.call('HSET', PLACES, ARGV[1], format(p))
    refresh(ARGV[4])
    return {EXISTING, unpack(view(p))}
  end
end
if redis.call('HGET', QUEUE, 'soldout') == '1' then
  return {SOLD_OUT}
end
local ticket = ARGV[3]
if p then
  -- Expired: to the back under the same ticket; its old slot left the
  -- line when it was admitted or skipped, so it is passed already.
  ticket = p.ticket
  redis.call('HINCRBY', QUEUE, 'expired', -1)
else
  redis.call('HSETNX', QUEUE, 'epoch', ticket)
  stamp()
end
p = {state = 'w', index = redis.call('HINCRBY', QUEUE, 'tail', 1) - 1, seen = at, til = 0, ticket = ticket}
redis.call('HSET', PLACES, ARGV[1], format(p))
if redis.call('RPUSH', LINE, ARGV[1]) == 1 then
  -- The line went when its last place was admitted: it is new again.
  redis.call('PEXPIRE', LINE, ARGV[4])
end
refresh(ARGV[4])
return {OK, unpack(view(p))}
