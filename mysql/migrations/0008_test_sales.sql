-- Test sales (issue 11): a load test's sale, hidden from the public list
-- and deletable with its orders. As in 0003: the ALTER runs only while
-- the column is missing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'test') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN test BOOLEAN NOT NULL DEFAULT FALSE');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
