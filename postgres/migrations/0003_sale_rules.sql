-- The rules a sale carries beyond min_tier (issue 8): the eligibility
-- rules min_stays_30d and channels (comma-joined; a channel name has no
-- comma), the per-sale limit overrides as the configuration writes a rate
-- ('' keeps the instance's default, 'off', '300/s,600') and the
-- proof-of-work difficulty (0: no challenge). Constant defaults add the
-- columns without rewriting the table, and a sale created before them has
-- none of them.
ALTER TABLE sales
	ADD COLUMN IF NOT EXISTS min_stays_30d        INT          NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS channels             VARCHAR(1100) NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS limit_per_sale       VARCHAR(32)  NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS limit_per_user       VARCHAR(32)  NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS limit_per_ip         VARCHAR(32)  NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS challenge_difficulty INT          NOT NULL DEFAULT 0;
