-- Sales and their nights. Times are unix milliseconds; money is minor units.
CREATE TABLE IF NOT EXISTS sales (
	id             VARCHAR(64)  NOT NULL PRIMARY KEY,
	title          VARCHAR(200) NOT NULL,
	hotel          VARCHAR(200) NOT NULL,
	room_type      VARCHAR(200) NOT NULL,
	price          BIGINT       NOT NULL,
	original_price BIGINT       NOT NULL,
	currency       VARCHAR(3)   NOT NULL,
	starts_at_ms   BIGINT       NOT NULL,
	ends_at_ms     BIGINT       NOT NULL,
	per_user_limit INTEGER      NOT NULL,
	hold_seconds   INTEGER      NOT NULL,
	purchase_token BOOLEAN      NOT NULL,
	min_tier       VARCHAR(16)  NOT NULL DEFAULT '',
	created_at_ms  BIGINT       NOT NULL
);
CREATE INDEX IF NOT EXISTS sales_ends_at ON sales (ends_at_ms);

-- The CHECK is the last line of defence against overselling (I1): a bug
-- that slipped past the conditional updates fails loudly instead.
CREATE TABLE IF NOT EXISTS nights (
	sale_id VARCHAR(64) NOT NULL,
	idx     INTEGER     NOT NULL,
	date    DATE        NOT NULL,
	stock   INTEGER     NOT NULL,
	held    INTEGER     NOT NULL DEFAULT 0,
	sold    INTEGER     NOT NULL DEFAULT 0,
	PRIMARY KEY (sale_id, idx),
	CONSTRAINT nights_counters CHECK (held >= 0 AND sold >= 0 AND held + sold <= stock)
);

-- idempotency_key is NULL when the client sent none; NULLs are distinct,
-- so the unique constraint only binds keys that exist.
CREATE TABLE IF NOT EXISTS orders (
	id                 VARCHAR(64)  NOT NULL PRIMARY KEY,
	sale_id            VARCHAR(64)  NOT NULL,
	user_id            VARCHAR(64)  NOT NULL,
	idempotency_key    VARCHAR(128) NULL,
	status             VARCHAR(16)  NOT NULL,
	first_night        INTEGER      NOT NULL,
	nights             INTEGER      NOT NULL,
	rooms              INTEGER      NOT NULL,
	amount             BIGINT       NOT NULL,
	currency           VARCHAR(3)   NOT NULL,
	hold_expires_at_ms BIGINT       NOT NULL,
	payment_ref        VARCHAR(128) NOT NULL DEFAULT '',
	created_at_ms      BIGINT       NOT NULL,
	updated_at_ms      BIGINT       NOT NULL,
	CONSTRAINT orders_idempotency UNIQUE (sale_id, user_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS orders_status_hold ON orders (status, hold_expires_at_ms);
CREATE INDEX IF NOT EXISTS orders_sale ON orders (sale_id);

-- user_rooms counts the rooms each user holds or bought in a sale, so the
-- per-user limit is one conditional upsert.
CREATE TABLE IF NOT EXISTS user_rooms (
	sale_id VARCHAR(64) NOT NULL,
	user_id VARCHAR(64) NOT NULL,
	rooms   INTEGER     NOT NULL,
	PRIMARY KEY (sale_id, user_id),
	CONSTRAINT user_rooms_rooms CHECK (rooms >= 0)
);
