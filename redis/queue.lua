-- queue.lua is what every queue script shares (redis/queue.go): it runs
-- ahead of each script's body, folded onto one line (queueSource) so that
-- Redis's line numbers in an error still match the body's file. Lines of
-- code here must therefore carry no trailing comment.
--
-- KEYS of every queue script: 1 the queue hash, 2 places, 3 line, 4 live,
-- 5 draw, 6 ranks (the key layout is Queue's doc comment in
-- redis/queue.go).
--
-- A place is one string, its fields comma-separated:
--   <state><index>,<seen ms>,<until ms>,<ticket>
-- state: w waiting, a admitted (live), u admitted and used, e expired.
-- index is the place's in the queue's order, except for the places the
-- draw put in order: theirs is their arrival index, below the number drawn
-- (the queue hash's drawn), and the ranks string maps it to the order's
-- (index, below). So the draw writes one string, not every place. A
-- Restore writes every index out, and sets drawn to 0.
local QUEUE, PLACES, LINE, LIVE, DRAW, RANKS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local function parse(rec)
  local s, i, seen, til, t = string.match(rec, '^(%a)(%d+),(%d+),(%d+),(.+)$')
  return {state = s, index = tonumber(i), seen = tonumber(seen), til = tonumber(til), ticket = t}
end
local function format(p)
  return string.format('%s%d,%d,%d,%s', p.state, p.index, p.seen, p.til, p.ticket)
end
-- touch keeps every key of the queue for ttl ms more.
local function touch(ttl)
  for _, k in ipairs(KEYS) do
    redis.call('PEXPIRE', k, ttl)
  end
end
-- refresh touches the keys when their time to live has run down by an
-- hour or more: a join then costs one PTTL, not a PEXPIRE of every key.
local function refresh(ttl)
  if redis.call('PTTL', QUEUE) < tonumber(ttl) - 3600000 then
    touch(ttl)
  end
end
-- lapse expires the admissions that ended before at (ms) unused: the live
-- set holds them by deadline, so this reads only those that lapse.
local function lapse(at)
  local gone = redis.call('ZRANGEBYSCORE', LIVE, '-inf', '(' .. at)
  if #gone == 0 then
    return
  end
  local n = 0
  for _, u in ipairs(gone) do
    local rec = redis.call('HGET', PLACES, u)
    if rec then
      local p = parse(rec)
      if p.state == 'a' then
        p.state = 'e'
        redis.call('HSET', PLACES, u, format(p))
        n = n + 1
      end
    end
  end
  redis.call('HINCRBY', QUEUE, 'expired', n)
  redis.call('ZREMRANGEBYSCORE', LIVE, '-inf', '(' .. at)
end
-- index is p's index in the queue's order once drawn is the number the
-- draw put in order: the ranks string holds each one's as 4 bytes, big
-- endian, at 4 times its arrival index.
local function index(p, drawn)
  if p.index >= drawn then
    return p.index
  end
  local b1, b2, b3, b4 = string.byte(redis.call('GETRANGE', RANKS, p.index * 4, p.index * 4 + 3), 1, 4)
  return ((b1 * 256 + b2) * 256 + b3) * 256 + b4
end
-- view is p as its guest sees it: {ticket, state, rank, ahead, until ms},
-- the state s (sold out) for a guest waiting in a sold-out queue.
local function view(p)
  local q = redis.call('HMGET', QUEUE, 'drawn', 'head', 'soldout')
  local rank, ahead, state = 0, 0, p.state
  local i = 0
  if q[1] then
    i = index(p, tonumber(q[1]))
    rank = i + 1
  end
  if state == 'w' then
    if q[1] then
      ahead = i - (tonumber(q[2]) or 0)
    end
    if q[3] == '1' then
      state = 's'
    end
  end
  return {p.ticket, state, rank, ahead, p.til}
end
-- stats are the queue's counts: {drawn, joined, admitted (live), used,
-- expired, sold out}, each a number.
local function stats()
  local q = redis.call('HMGET', QUEUE, 'drawn', 'used', 'expired', 'soldout')
  local drawn, soldout = 0, 0
  if q[1] then
    drawn = 1
  end
  if q[4] == '1' then
    soldout = 1
  end
  return {drawn, redis.call('HLEN', PLACES), redis.call('ZCARD', LIVE), tonumber(q[2]) or 0, tonumber(q[3]) or 0, soldout}
end
-- fence stops the script (an error reply starting STALE) when the queue
-- was stamped by another Redis process: one restarted from a snapshot or an
-- AOF, or a replica promoted, whose places may be behind the database's.
-- Every script but Restore's calls it first, so the queue refuses until a
-- Restore brings it up to its records and stamps it with this process.
local function fence()
  local s = redis.call('HGET', QUEUE, 'node')
  if s and s ~= node() then
    error({err = 'STALE the waiting room was kept by another Redis process; it is being restored'})
  end
end
-- stamp marks a queue as this Redis process's, if it has no mark yet.
local function stamp()
  redis.call('HSETNX', QUEUE, 'node', node())
end
