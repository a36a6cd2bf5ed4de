-- The hotel's time zone (an IANA name; '' for none), where a night's date
-- is a civil date. As in 0003: the ALTER runs only while the column is
-- missing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'time_zone') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN time_zone VARCHAR(64) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
