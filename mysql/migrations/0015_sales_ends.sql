-- The current sales, read once a second (Revisions) and on every refresh
-- (Sales), are those that end after now. sales_ends_at (ends_at_ms) holds
-- the id already (every InnoDB secondary key ends in the primary key) but
-- not the revision, so Revisions read each current row as well; with
-- revision in it the index alone answers Revisions, and it serves
-- everything sales_ends_at served, which it replaces.
--
-- MySQL 8 has no ADD INDEX IF NOT EXISTS nor DROP INDEX IF EXISTS and
-- commits DDL implicitly: as in 0014, each ALTER runs only while it has
-- something to do, so a run cut short between them completes on the next.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND index_name = 'sales_ends') > 0,
	'DO 0',
	'ALTER TABLE sales ADD INDEX sales_ends (ends_at_ms, id, revision)');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;

SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND index_name = 'sales_ends_at') = 0,
	'DO 0',
	'ALTER TABLE sales DROP INDEX sales_ends_at');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
