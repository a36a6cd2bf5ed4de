-- The outbox of order events (issue 10): every order's change of status
-- and every sale's last room going is a row of notices, written in the
-- change's own transaction. seq is the delivery order; the single writer
-- commits in the order it assigns it, so a notice that commits later
-- never has a lower seq than one already visible. AUTOINCREMENT: a seq is
-- never reused, even after the newest rows are deleted. payload is the
-- event's JSON as delivered.
CREATE TABLE notices (
	seq      INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	id       TEXT    NOT NULL UNIQUE,
	type     TEXT    NOT NULL,
	sale_id  TEXT    NOT NULL,
	order_id TEXT    NOT NULL,
	at_ms    INTEGER NOT NULL,
	payload  TEXT    NOT NULL
) STRICT;

-- How far each transport (webhook, amqp) has delivered the outbox, and
-- which dispatcher holds it until when: one lease per transport, taken by
-- a conditional update, so one instance delivers in order.
CREATE TABLE notice_cursors (
	transport      TEXT    NOT NULL PRIMARY KEY,
	seq            INTEGER NOT NULL DEFAULT 0,
	owner          TEXT    NOT NULL,
	lease_until_ms INTEGER NOT NULL
) STRICT;

-- The delivery log: one row per attempt, read newest first, by transport,
-- by notice, or failed only.
CREATE TABLE deliveries (
	id        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
	transport TEXT    NOT NULL,
	notice_id TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	type      TEXT    NOT NULL,
	attempt   INTEGER NOT NULL,
	at_ms     INTEGER NOT NULL,
	ok        INTEGER NOT NULL,
	status    INTEGER NOT NULL,
	error     TEXT    NOT NULL,
	took_ns   INTEGER NOT NULL
) STRICT;
CREATE INDEX deliveries_transport ON deliveries (transport, id);
CREATE INDEX deliveries_notice ON deliveries (notice_id, id);
CREATE INDEX deliveries_failed ON deliveries (id) WHERE NOT ok;
