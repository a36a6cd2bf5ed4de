-- Test sales (issue 11): a load test's sale, hidden from the public list
-- and deletable with its orders.
ALTER TABLE sales ADD COLUMN IF NOT EXISTS test BOOLEAN NOT NULL DEFAULT FALSE;
