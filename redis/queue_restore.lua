-- queue_restore.lua writes a queue rebuilt in Go (Queue.Restore) over the
-- one it read, if that one has not moved meanwhile.
--
-- KEYS: queue.lua's. ARGV: 1 the fingerprint read (Queue.fingerprint's
-- fields, joined by commas: tail, head, used, expired, drawn, places,
-- live), 2 at (unix ms), 3 the keys' time to live (ms), 4 a new epoch
-- (kept only for a queue without one), 5 head, 6 tail, 7 used, 8 expired,
-- 9 the seed ('' before the draw), 10 the order (tickets separated by
-- spaces), 11 the number of places p, 12 the number of line entries l,
-- 13 the number of live admissions v, then p user, place pairs, l line
-- entries ('' for a slot nobody holds), v until, user pairs.
--
-- Reply: {OK}, or {} if the queue moved since it was read: read again.
local q = redis.call('HMGET', QUEUE, 'tail', 'head', 'used', 'expired', 'drawn')
local fp = {}
for i = 1, 5 do
  fp[i] = q[i] or ''
end
fp[6] = redis.call('HLEN', PLACES)
fp[7] = redis.call('ZCARD', LIVE)
if table.concat(fp, ',') ~= ARGV[1] then
  return {}
end
local p, l, v = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
redis.call('DEL', PLACES, LINE, LIVE, DRAW, RANKS)
local function each(cmd, key, from, to, step)
  for i = from, to, step do
    redis.call(cmd, key, unpack(ARGV, i, math.min(i + step - 1, to)))
  end
end
each('HSET', PLACES, 14, 13 + 2 * p, 1000)
each('RPUSH', LINE, 14 + 2 * p, 13 + 2 * p + l, 1000)
each('ZADD', LIVE, 14 + 2 * p + l, 13 + 2 * p + l + 2 * v, 1000)
redis.call('HSET', QUEUE, 'head', ARGV[5], 'tail', ARGV[6], 'used', ARGV[7], 'expired', ARGV[8])
redis.call('HSETNX', QUEUE, 'epoch', ARGV[4])
-- The queue is this process's now: the fence lets it through again.
redis.call('HSET', QUEUE, 'node', node())
if ARGV[9] ~= '' then
  -- Every place's index is its own now: none maps through the ranks.
  redis.call('HSET', QUEUE, 'drawn', 0, 'seed', ARGV[9])
  redis.call('SET', DRAW, ARGV[10])
else
  redis.call('HDEL', QUEUE, 'drawn', 'seed')
end
touch(ARGV[3])
lapse(tonumber(ARGV[2]))
return {OK}
