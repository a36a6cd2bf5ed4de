-- loaded.lua answers whether a sale is loaded, for Missing: read.lua's
-- stale check (redis/reply.go) on the same keys, and nothing else, so a
-- sale is missing exactly when Available would answer ErrNotLoaded, and a
-- stale one is unloaded here as it would be there.
--
-- KEYS: 1 meta, 2 stock, 3 res (read.lua's)
--
-- Reply: {OK}, {NOT_LOADED}, {STALE}.
local meta, refused = loaded(2)
if not meta then
  return refused
end
return {OK}
