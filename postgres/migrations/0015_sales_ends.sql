-- The current sales, read once a second (Revisions) and on every refresh
-- (Sales), are those that end after now. With id and revision in it the
-- index alone answers Revisions (an index-only scan), and it serves
-- everything sales_ends_at (ends_at_ms) served, which it replaces.
CREATE INDEX IF NOT EXISTS sales_ends ON sales (ends_at_ms, id, revision);
DROP INDEX IF EXISTS sales_ends_at;
