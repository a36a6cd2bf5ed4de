-- Why a failed order failed, for its owner and the audit: the refusal's
-- error code (sold_out, limit_exceeded, conflict) when PlaceOrders refused
-- it, or what the order path gave up on when FailOrder recorded it. Empty
-- for every other order.
ALTER TABLE orders ADD COLUMN failure_reason TEXT NOT NULL DEFAULT '';
