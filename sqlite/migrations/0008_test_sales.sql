-- Test sales (issue 11): a load test's sale, hidden from the public list
-- and deletable with its orders.
ALTER TABLE sales ADD COLUMN test INTEGER NOT NULL DEFAULT 0;
