-- Why a failed order failed, for its owner and the audit: the refusal's
-- error code (sold_out, limit_exceeded, conflict) when PlaceOrders refused
-- it, or what the order path gave up on when FailOrder recorded it. Empty
-- for every other order.
--
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has) and commits DDL
-- implicitly, so the column is added through a prepared statement only if
-- it is missing: a rerun after an interrupted migration does nothing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'orders' AND column_name = 'failure_reason') > 0,
	'DO 0',
	'ALTER TABLE orders ADD COLUMN failure_reason VARCHAR(200) NOT NULL DEFAULT ''''');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;
