-- The operator's side of a sale's life (issue 10): a description, the
-- paused flag, the revision every change bumps (so an instance that caches
-- the sale can tell it changed) and the change log, one row per edit,
-- pause, resume, close or stock change, written in the change's own
-- transaction. Constant defaults add the columns without rewriting the
-- table: a sale created before them is undescribed, running and at
-- revision 0.
ALTER TABLE sales
	ADD COLUMN IF NOT EXISTS description VARCHAR(2000) NOT NULL DEFAULT '',
	ADD COLUMN IF NOT EXISTS paused      BOOLEAN       NOT NULL DEFAULT false,
	ADD COLUMN IF NOT EXISTS revision    BIGINT        NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS sale_changes (
	id       BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sale_id  VARCHAR(64) NOT NULL,
	at_ms    BIGINT      NOT NULL,
	kind     VARCHAR(16) NOT NULL,
	revision BIGINT      NOT NULL,
	detail   TEXT        NOT NULL
);
CREATE INDEX IF NOT EXISTS sale_changes_sale ON sale_changes (sale_id, id);

-- The operators' order list walks a sale's orders by id, newest first;
-- (sale_id, id) serves it and everything orders_sale (sale_id) served.
CREATE INDEX IF NOT EXISTS orders_sale_id ON orders (sale_id, id);
DROP INDEX IF EXISTS orders_sale;
