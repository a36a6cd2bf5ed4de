-- A sale's kind and its slots' times (issue 25). kind is the Kind as
-- written, '' for a sale from before kinds, which is a stay. A slot sale
-- has several units on one date (a restaurant's three services), each
-- with its start in the venue's zone ('19:00'; start_time, since TIME
-- names a type) and its length in minutes (0 for none); a stay's night
-- has '' and 0, as every night from before. The nights' key is
-- (sale_id, idx), never the date, so a date may repeat. As in 0003: each
-- ALTER runs only while its column is missing, so a run cut short
-- between two of them (MySQL commits each) completes on the next.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'kind') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;

SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'nights' AND column_name = 'start_time') > 0,
	'DO 0',
	'ALTER TABLE nights ADD COLUMN start_time VARCHAR(5) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;

SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'nights' AND column_name = 'minutes') > 0,
	'DO 0',
	'ALTER TABLE nights ADD COLUMN minutes INT NOT NULL DEFAULT 0');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
