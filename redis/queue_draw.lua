-- queue_draw.lua writes the draw computed in Go from Queue.prequeue's
-- read (Queue.Draw): the line becomes the drawn users in order, then those
-- who joined since the read in their arrival order (at the back, where
-- every join after the draw goes), and the ranks string maps each drawn
-- place's arrival index to its index in the order (queue.lua's index), so
-- no place is rewritten. Only the first draw writes.
--
-- KEYS: queue.lua's. ARGV: 1 the seed, 2 the epoch read, 3 the tail read
-- (the number drawn), 4 the ranks string, 5 the order (tickets separated
-- by spaces), 6 the keys' time to live (ms), 7... the users in the drawn
-- order.
--
-- Reply: {OK} once written, {EXISTING} if another draw came first, {} if
-- the queue is not the one read (it was dropped meanwhile): read again.
fence()
local q = redis.call('HMGET', QUEUE, 'drawn', 'epoch', 'tail')
if q[1] then
  return {EXISTING}
end
local n = tonumber(ARGV[3])
if (q[2] or '') ~= ARGV[2] or (tonumber(q[3]) or 0) < n or #ARGV - 6 ~= n then
  return {}
end
-- Before the draw nobody has left the line, so its first n entries are
-- the places read, and the rest joined since.
local later = redis.call('LRANGE', LINE, n, -1)
redis.call('DEL', LINE)
local function push(list, from, to)
  for i = from, to, 1000 do
    redis.call('RPUSH', LINE, unpack(list, i, math.min(i + 999, to)))
  end
end
push(ARGV, 7, #ARGV)
push(later, 1, #later)
redis.call('SET', RANKS, ARGV[4])
redis.call('SET', DRAW, ARGV[5])
redis.call('HSET', QUEUE, 'drawn', n, 'seed', ARGV[1], 'head', 0)
stamp()
touch(ARGV[6])
return {OK}
