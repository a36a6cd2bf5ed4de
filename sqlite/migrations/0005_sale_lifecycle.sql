-- The operator's side of a sale's life (issue 10): a description, the
-- paused flag, the revision every change bumps (so an instance that caches
-- the sale can tell it changed) and the change log, one row per edit,
-- pause, resume, close or stock change, written in the change's own
-- transaction. Constant defaults: a sale created before them is
-- undescribed, running and at revision 0.
ALTER TABLE sales ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE sales ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sales ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;

CREATE TABLE sale_changes (
	id       INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	sale_id  TEXT    NOT NULL REFERENCES sales (id),
	at_ms    INTEGER NOT NULL,
	kind     TEXT    NOT NULL,
	revision INTEGER NOT NULL,
	detail   TEXT    NOT NULL
) STRICT;
CREATE INDEX sale_changes_sale ON sale_changes (sale_id, id);

-- The operators' order list walks a sale's orders by id, newest first;
-- orders_sale (sale_id) ends in the rowid, not the id, so it is replaced.
CREATE INDEX orders_sale_id ON orders (sale_id, id);
DROP INDEX orders_sale;
