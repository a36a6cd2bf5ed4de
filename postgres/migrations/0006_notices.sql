-- The outbox of order events (issue 10): every order's change of status
-- and every sale's last room going is a row of notices, written in the
-- change's own transaction. seq is the delivery order. Every transaction
-- that writes notices takes the outbox's advisory lock just before (see
-- notice.go) and holds it until it commits, so seqs are handed out in
-- commit order: a notice that commits later never has a lower seq than
-- one already visible, and a dispatcher that read up to seq N never finds
-- an N-1 appear behind it. payload is the event's JSON as delivered.
CREATE TABLE IF NOT EXISTS notices (
	seq      BIGINT       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id       VARCHAR(200) NOT NULL UNIQUE,
	type     VARCHAR(32)  NOT NULL,
	sale_id  VARCHAR(64)  NOT NULL,
	order_id VARCHAR(64)  NOT NULL,
	at_ms    BIGINT       NOT NULL,
	payload  TEXT         NOT NULL
);

-- How far each transport (webhook, amqp) has delivered the outbox, and
-- which dispatcher holds it until when: one lease per transport, taken by
-- a conditional upsert, so one instance delivers in order.
CREATE TABLE IF NOT EXISTS notice_cursors (
	transport      VARCHAR(64) NOT NULL PRIMARY KEY,
	seq            BIGINT      NOT NULL DEFAULT 0,
	owner          VARCHAR(64) NOT NULL,
	lease_until_ms BIGINT      NOT NULL
);

-- The delivery log: one row per attempt, read newest first, by transport,
-- by notice, or failed only.
CREATE TABLE IF NOT EXISTS deliveries (
	id        BIGINT       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	transport VARCHAR(64)  NOT NULL,
	notice_id VARCHAR(200) NOT NULL,
	seq       BIGINT       NOT NULL,
	type      VARCHAR(32)  NOT NULL,
	attempt   INTEGER      NOT NULL,
	at_ms     BIGINT       NOT NULL,
	ok        BOOLEAN      NOT NULL,
	status    INTEGER      NOT NULL,
	error     TEXT         NOT NULL,
	took_ns   BIGINT       NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_transport ON deliveries (transport, id);
CREATE INDEX IF NOT EXISTS deliveries_notice ON deliveries (notice_id, id);
CREATE INDEX IF NOT EXISTS deliveries_failed ON deliveries (id) WHERE NOT ok;
