-- A sale's stay rules per night (issue 25): a JSON object of the nights
-- that have any rule, keyed by date
-- ({"2026-12-24":{"min_stay":2},"2026-12-25":{"stop_sell":true}}), so it
-- never misaligns with the nights; '' when no night has one, which every
-- sale created before it has. 366 nights of every rule come to about
-- 40 KB, close to TEXT's 64 KiB: MEDIUMTEXT. MySQL 8 gives a TEXT column
-- a default only as an expression, ('') (8.0.13+), which MariaDB accepts
-- too; the default lets an instance of the release before it, still
-- running during an upgrade, create sales. As in 0003: the ALTER runs
-- only while the column is missing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'stay_rules') > 0,
	'DO 0',
	'ALTER TABLE sales ADD COLUMN stay_rules MEDIUMTEXT NOT NULL DEFAULT ('''')');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
