-- Stepped prices (issue 10): "rooms:price,..." per room-night, '' for none.
-- As in 0003: MySQL 8 has no ADD COLUMN IF NOT EXISTS, so the ALTER runs
-- only while the column is missing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'price_tiers') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN price_tiers VARCHAR(400) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
