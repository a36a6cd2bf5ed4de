-- A sale's waiting room (issue 24): its settings as JSON
-- ({"prequeue_minutes":...,"admit_per_second":...,"admission_seconds":...}),
-- '' for none, which every sale created before it has. As in 0003: the
-- ALTER runs only while the column is missing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'waiting_room') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN waiting_room VARCHAR(200) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
