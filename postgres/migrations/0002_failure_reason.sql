-- Why a failed order failed, for its owner and the audit: the refusal's
-- error code (sold_out, limit_exceeded, conflict) when PlaceOrders refused
-- it, or what the order path gave up on when FailOrder recorded it. Empty
-- for every other order. A constant default adds the column without
-- rewriting the table.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS failure_reason VARCHAR(200) NOT NULL DEFAULT '';
