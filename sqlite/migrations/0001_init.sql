-- The initial schema. Times are unix milliseconds. The CHECK constraints are
-- the last line of defence: even a buggy guard cannot oversell a night or
-- give back more rooms than were taken.

CREATE TABLE sales (
	id             TEXT    NOT NULL PRIMARY KEY,
	title          TEXT    NOT NULL,
	hotel          TEXT    NOT NULL,
	room_type      TEXT    NOT NULL,
	price          INTEGER NOT NULL,
	original_price INTEGER NOT NULL,
	currency       TEXT    NOT NULL,
	starts_at_ms   INTEGER NOT NULL,
	ends_at_ms     INTEGER NOT NULL,
	per_user_limit INTEGER NOT NULL,
	hold_seconds   INTEGER NOT NULL,
	purchase_token INTEGER NOT NULL DEFAULT 0,
	min_tier       TEXT    NOT NULL DEFAULT '',
	created_at_ms  INTEGER NOT NULL
) STRICT;

CREATE TABLE nights (
	sale_id TEXT    NOT NULL REFERENCES sales (id),
	idx     INTEGER NOT NULL,
	date    TEXT    NOT NULL,
	stock   INTEGER NOT NULL,
	held    INTEGER NOT NULL DEFAULT 0,
	sold    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (sale_id, idx),
	CHECK (held >= 0 AND sold >= 0 AND held + sold <= stock)
) STRICT;

CREATE TABLE orders (
	id                 TEXT    NOT NULL PRIMARY KEY,
	sale_id            TEXT    NOT NULL REFERENCES sales (id),
	user_id            TEXT    NOT NULL,
	idempotency_key    TEXT    NULL,
	status             TEXT    NOT NULL,
	first_night        INTEGER NOT NULL,
	nights             INTEGER NOT NULL,
	rooms              INTEGER NOT NULL,
	amount             INTEGER NOT NULL,
	currency           TEXT    NOT NULL,
	hold_expires_at_ms INTEGER NOT NULL,
	payment_ref        TEXT    NOT NULL DEFAULT '',
	created_at_ms      INTEGER NOT NULL,
	updated_at_ms      INTEGER NOT NULL,
	UNIQUE (sale_id, user_id, idempotency_key)
) STRICT;

CREATE INDEX orders_status_hold ON orders (status, hold_expires_at_ms);
CREATE INDEX orders_sale ON orders (sale_id);

CREATE TABLE user_rooms (
	sale_id TEXT    NOT NULL REFERENCES sales (id),
	user_id TEXT    NOT NULL,
	rooms   INTEGER NOT NULL,
	PRIMARY KEY (sale_id, user_id),
	CHECK (rooms >= 0)
) STRICT;
