-- The operator's side of a sale's life (issue 10): a description, the
-- paused flag, the revision every change bumps (so an instance that caches
-- the sale can tell it changed) and the change log, one row per edit,
-- pause, resume, close or stock change, written in the change's own
-- transaction. A sale created before them is undescribed, running and at
-- revision 0.
--
-- The operators' order list walks a sale's orders by id, newest first:
-- orders_sale (sale_id) already serves it, as every InnoDB secondary key
-- ends in the primary key.
--
-- MySQL 8 has no ADD COLUMN IF NOT EXISTS and commits DDL implicitly: one
-- ALTER adds the three columns or none, so it runs only while the first is
-- missing and a rerun after an interrupted migration does nothing.
SET @flashsale_ddl = IF(
	(SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'sales' AND column_name = 'description') > 0,
	'DO 0',
	'ALTER TABLE sales
		ADD COLUMN description VARCHAR(2000) NOT NULL DEFAULT '''',
		ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE,
		ADD COLUMN revision BIGINT NOT NULL DEFAULT 0');
PREPARE flashsale_ddl FROM @flashsale_ddl;
EXECUTE flashsale_ddl;
DEALLOCATE PREPARE flashsale_ddl;

CREATE TABLE IF NOT EXISTS sale_changes (
	id       BIGINT      NOT NULL AUTO_INCREMENT,
	sale_id  VARCHAR(64) NOT NULL,
	at_ms    BIGINT      NOT NULL,
	kind     VARCHAR(16) NOT NULL,
	revision BIGINT      NOT NULL,
	detail   TEXT        NOT NULL,
	PRIMARY KEY (id),
	KEY sale_changes_sale (sale_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
