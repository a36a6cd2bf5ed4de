-- queue_stats.lua is the queue's counts after lapsing the admissions that
-- ended (Queue.Stats).
--
-- KEYS: queue.lua's. ARGV: 1 at (unix ms).
--
-- Reply: stats() (queue.lua); zeros for a sale without a queue.
fence()
lapse(tonumber(ARGV[1]))
return stats()
