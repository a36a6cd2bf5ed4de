-- The current sales, read once a second (Revisions) and on every refresh
-- (Sales), are those that end after now: without an index each read
-- scanned every sale ever made, ended ones included. With id and revision
-- in it the index alone answers Revisions.
CREATE INDEX sales_ends ON sales (ends_at_ms, id, revision);
