-- The rules a sale carries beyond min_tier (issue 8): the eligibility
-- rules min_stays_30d and channels (comma-joined; a channel name has no
-- comma), the per-sale limit overrides as the configuration writes a rate
-- ('' keeps the instance's default, 'off', '300/s,600') and the
-- proof-of-work difficulty (0: no challenge). Constant defaults: a sale
-- created before them has none of them.
ALTER TABLE sales ADD COLUMN min_stays_30d INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sales ADD COLUMN channels TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN limit_per_sale TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN limit_per_user TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN limit_per_ip TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN challenge_difficulty INTEGER NOT NULL DEFAULT 0;
