-- loaded.lua answers, for each of a run of sales, whether it is loaded
-- and, with ARGV[1] = '1', its units left per night, for Missing and
-- AvailableOf: read.lua's stale check (redis/reply.go) on read.lua's keys,
-- and nothing else, so a sale is missing exactly when Available would
-- answer ErrNotLoaded, and a stale one is unloaded here as it would be
-- there. The sales' keys need not share a slot, so on a Cluster a run is
-- one sale (redis/loaded.go).
--
-- KEYS: meta, stock, res (read.lua's) of each sale in turn
-- ARGV: 1 '1' to read the units too
--
-- Reply: one per sale, in KEYS order: {OK, nights, {night, units, ...}}
-- ({OK} without the units), {NOT_LOADED} or {STALE}.
local out = {}
for base = 0, #KEYS - 3, 3 do
  local meta, refused = loadedAt(base, 2)
  if not meta then
    out[#out + 1] = refused
  elseif ARGV[1] == '1' then
    out[#out + 1] = {OK, tonumber(meta[1]), redis.call('HGETALL', KEYS[base + 2])}
  else
    out[#out + 1] = {OK}
  end
end
return out
