-- Sales and their nights. Times are unix milliseconds; money is minor units.
CREATE TABLE IF NOT EXISTS sales (
	id             VARCHAR(64)  NOT NULL,
	title          VARCHAR(200) NOT NULL,
	hotel          VARCHAR(200) NOT NULL,
	room_type      VARCHAR(200) NOT NULL,
	price          BIGINT       NOT NULL,
	original_price BIGINT       NOT NULL,
	currency       CHAR(3)      NOT NULL,
	starts_at_ms   BIGINT       NOT NULL,
	ends_at_ms     BIGINT       NOT NULL,
	per_user_limit INT          NOT NULL,
	hold_seconds   INT          NOT NULL,
	purchase_token BOOLEAN      NOT NULL,
	min_tier       VARCHAR(16)  NOT NULL DEFAULT '',
	created_at_ms  BIGINT       NOT NULL,
	PRIMARY KEY (id),
	KEY sales_ends_at (ends_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The CHECK is the last line of defence against overselling (I1): a bug
-- that slipped past the conditional updates fails loudly instead.
CREATE TABLE IF NOT EXISTS nights (
	sale_id VARCHAR(64) NOT NULL,
	idx     INT         NOT NULL,
	date    DATE        NOT NULL,
	stock   INT         NOT NULL,
	held    INT         NOT NULL DEFAULT 0,
	sold    INT         NOT NULL DEFAULT 0,
	PRIMARY KEY (sale_id, idx),
	CONSTRAINT nights_counters CHECK (held >= 0 AND sold >= 0 AND held + sold <= stock)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- idempotency_key is NULL when the client sent none, so the unique key
-- only binds keys that exist.
CREATE TABLE IF NOT EXISTS orders (
	id                 VARCHAR(64)  NOT NULL,
	sale_id            VARCHAR(64)  NOT NULL,
	user_id            VARCHAR(64)  NOT NULL,
	idempotency_key    VARCHAR(128) NULL,
	status             VARCHAR(16)  NOT NULL,
	first_night        INT          NOT NULL,
	nights             INT          NOT NULL,
	rooms              INT          NOT NULL,
	amount             BIGINT       NOT NULL,
	currency           CHAR(3)      NOT NULL,
	hold_expires_at_ms BIGINT       NOT NULL,
	payment_ref        VARCHAR(128) NOT NULL DEFAULT '',
	created_at_ms      BIGINT       NOT NULL,
	updated_at_ms      BIGINT       NOT NULL,
	PRIMARY KEY (id),
	UNIQUE KEY orders_idempotency (sale_id, user_id, idempotency_key),
	KEY orders_status_hold (status, hold_expires_at_ms),
	KEY orders_sale (sale_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- user_rooms counts the rooms each user holds or bought in a sale, so the
-- per-user limit is one conditional upsert.
CREATE TABLE IF NOT EXISTS user_rooms (
	sale_id VARCHAR(64) NOT NULL,
	user_id VARCHAR(64) NOT NULL,
	rooms   INT         NOT NULL,
	PRIMARY KEY (sale_id, user_id),
	CONSTRAINT user_rooms_rooms CHECK (rooms >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
