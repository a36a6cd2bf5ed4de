-- The outbox of order events (issue 10): every order's change of status
-- and every sale's last room going is a row of notices, written in the
-- change's own transaction. seq is the delivery order. Every transaction
-- that writes notices first locks the one row of notice_lock (see
-- notice.go) and holds it until it commits, so seqs are handed out in
-- commit order: a notice that commits later never has a lower seq than
-- one already visible, and a dispatcher that read up to seq N never finds
-- an N-1 appear behind it. payload is the event's JSON as delivered.
CREATE TABLE IF NOT EXISTS notices (
	seq      BIGINT       NOT NULL AUTO_INCREMENT,
	id       VARCHAR(200) NOT NULL,
	type     VARCHAR(32)  NOT NULL,
	sale_id  VARCHAR(64)  NOT NULL,
	order_id VARCHAR(64)  NOT NULL,
	at_ms    BIGINT       NOT NULL,
	payload  TEXT         NOT NULL,
	PRIMARY KEY (seq),
	UNIQUE KEY notices_id (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The outbox's write lock: one row, locked FOR UPDATE by every
-- transaction that writes notices, last of all its locks.
CREATE TABLE IF NOT EXISTS notice_lock (
	id TINYINT NOT NULL,
	PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO notice_lock (id) VALUES (1);

-- How far each transport (webhook, amqp) has delivered the outbox, and
-- which dispatcher holds it until when: one lease per transport, taken by
-- a conditional upsert, so one instance delivers in order.
CREATE TABLE IF NOT EXISTS notice_cursors (
	transport      VARCHAR(64) NOT NULL,
	seq            BIGINT      NOT NULL DEFAULT 0,
	owner          VARCHAR(64) NOT NULL,
	lease_until_ms BIGINT      NOT NULL,
	PRIMARY KEY (transport)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The delivery log: one row per attempt, read newest first, by transport,
-- by notice, or failed only.
CREATE TABLE IF NOT EXISTS deliveries (
	id        BIGINT       NOT NULL AUTO_INCREMENT,
	transport VARCHAR(64)  NOT NULL,
	notice_id VARCHAR(200) NOT NULL,
	seq       BIGINT       NOT NULL,
	type      VARCHAR(32)  NOT NULL,
	attempt   INT          NOT NULL,
	at_ms     BIGINT       NOT NULL,
	ok        BOOLEAN      NOT NULL,
	status    INT          NOT NULL,
	error     TEXT         NOT NULL,
	took_ns   BIGINT       NOT NULL,
	PRIMARY KEY (id),
	KEY deliveries_transport (transport, id),
	KEY deliveries_notice (notice_id, id),
	KEY deliveries_failed (ok, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
