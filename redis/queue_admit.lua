-- queue_admit.lua is one admission step (Queue.Admit): it lapses the
-- admissions that ended, then, once the queue is drawn, admits from the
-- front what the rate owes and the stock allows, skipping the idle, and
-- sets the sold-out flag. The clock (owed, last) is the queue hash's, so
-- every instance stepping the queue shares it.
--
-- KEYS: queue.lua's. ARGV: 1 at (unix ms), 2 how long an admission lasts
-- (ms), 3 idle after (ms, 0 never), 4 rate (a second), 5 rooms left,
-- 6 the keys' time to live (ms), 7 the admissions used when the rooms left
-- were read (AdmitRule.Used).
--
-- Reply: {stats(), the users admitted, the users skipped}, the users in
-- queue order.
fence()
local at = tonumber(ARGV[1])
if redis.call('EXISTS', QUEUE) == 0 then
  return {stats(), {}, {}}
end
lapse(at)
local q = redis.call('HMGET', QUEUE, 'drawn', 'owed', 'last', 'head', 'used', 'soldout', 'low')
if not q[1] then
  return {stats(), {}, {}}
end
local rate = tonumber(ARGV[4])
local owed, last = tonumber(q[2]) or 0, tonumber(q[3])
-- What the rate owes since the last step: nothing at the first (it starts
-- the clock), at most a second's worth, and nothing at a step older than
-- the last (another instance's clock is a little ahead).
if not last then
  last = at
elseif at > last then
  owed = math.min(owed + rate * (at - last) / 1000, math.max(rate, 1))
  last = at
end
-- room is what the rooms left allow; sure is room less the admissions used
-- since those were read, which may have taken their rooms after the read
-- (or before it: then sure counts them twice). Admissions go by sure
-- (never one too many); the flag opens only when sure says so, and turns
-- sold out only when room says so at two steps in a row with no admission
-- used between them ('low' keeps the used count of the first): a purchase
-- that took its room before the read but spends its admission after this
-- step is counted twice by room too, and has spent it by the next step.
local room = tonumber(ARGV[5]) - redis.call('ZCARD', LIVE)
local sure = room - math.max((tonumber(q[5]) or 0) - tonumber(ARGV[7]), 0)
local n = math.min(math.floor(owed), sure)
local head, drawn = tonumber(q[4]) or 0, tonumber(q[1])
local til, idle = at + tonumber(ARGV[2]), tonumber(ARGV[3])
local admitted, users, skipped = 0, {}, {}
while admitted < n do
  local u = redis.call('LPOP', LINE)
  if not u then
    break
  end
  head = head + 1
  local rec = redis.call('HGET', PLACES, u)
  local p = rec and parse(rec)
  -- The line holds the places at indices head on: waiting ones, but also
  -- after a Restore a slot passed ('', no place) or a place that moved on,
  -- and a place that joined again further back leaves its old entry: the
  -- check admits only the place whose slot this is.
  if p and p.state == 'w' and index(p, drawn) == head - 1 then
    if idle > 0 and at - p.seen > idle then
      p.state = 'e'
      skipped[#skipped + 1] = u
    else
      p.state, p.til = 'a', til
      redis.call('ZADD', LIVE, til, u)
      admitted = admitted + 1
      users[admitted] = u
    end
    redis.call('HSET', PLACES, u, format(p))
  end
end
local soldout, low, used = q[6] or '0', q[7] or '', q[5] or '0'
if room - admitted > 0 then
  low = ''
  if sure - admitted > 0 then
    soldout = '0'
  end
elseif low == used then
  soldout = '1'
else
  low = used
end
if #skipped > 0 then
  redis.call('HINCRBY', QUEUE, 'expired', #skipped)
end
redis.call('HSET', QUEUE, 'head', head, 'owed', string.format('%.17g', owed - admitted), 'last', string.format('%d', last), 'soldout', soldout, 'low', low)
if admitted > 0 then
  -- The live set is made here, and kept as long as the rest.
  redis.call('PEXPIRE', LIVE, ARGV[6])
end
return {stats(), users, skipped}
