-- The rules a sale carries beyond min_tier (issue 8): the eligibility
-- rules min_stays_30d and channels (comma-joined; a channel name has no
-- comma), the per-sale limit overrides as the configuration writes a rate
-- ('' keeps the instance's default, 'off', '300/s,600') and the
-- proof-of-work difficulty (0: no challenge). A sale created before them
-- has none of them.
--
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS and commits DDL implicitly: one
-- ALTER adds all six columns or none, so it runs only while the first is
-- missing and a rerun after an interrupted migration does nothing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'min_stays_30d') > 0,
	'DO 0',
	'ALTER TABLE sales
		ADD COLUMN min_stays_30d INT NOT NULL DEFAULT 0,
		ADD COLUMN channels VARCHAR(1100) NOT NULL DEFAULT '''',
		ADD COLUMN limit_per_sale VARCHAR(32) NOT NULL DEFAULT '''',
		ADD COLUMN limit_per_user VARCHAR(32) NOT NULL DEFAULT '''',
		ADD COLUMN limit_per_ip VARCHAR(32) NOT NULL DEFAULT '''',
		ADD COLUMN challenge_difficulty INT NOT NULL DEFAULT 0');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
