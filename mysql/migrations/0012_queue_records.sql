-- The waiting rooms' records (issue 24, item 6): what a queue lost with
-- its process or its Redis is rebuilt from (flashsale.QueueRecords). One
-- row per place (sale, user): its ticket, its rank in the order (0 before
-- the draw; place_rank, as RANK is reserved in MySQL 8), when it was
-- taken, and how far it got: admitted until (NULL until admitted), skipped
-- at its turn, its admission used. Times are unix milliseconds. No foreign
-- key to sales: a place is recorded before its guest is told, whatever
-- else the sale's rows are doing. IF NOT EXISTS: MySQL commits DDL
-- implicitly, so an interrupted migration runs again.
CREATE TABLE IF NOT EXISTS queue_places (
	sale_id           VARCHAR(64) NOT NULL,
	user_id           VARCHAR(64) NOT NULL,
	ticket            VARCHAR(64) NOT NULL,
	place_rank        INT         NOT NULL,
	joined_at_ms      BIGINT      NOT NULL,
	admitted_until_ms BIGINT      NULL,
	skipped           BOOLEAN     NOT NULL DEFAULT FALSE,
	used              BOOLEAN     NOT NULL DEFAULT FALSE,
	PRIMARY KEY (sale_id, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A sale's draw, the first recorded: its seed and its sorted tickets,
-- newline-joined (up to 100 000 of 26 characters, past TEXT's 64 KiB:
-- MEDIUMTEXT's 16 MiB). Its order (DrawOrder) and its commitment
-- (DrawCommitment) are recomputed from them when read.
CREATE TABLE IF NOT EXISTS queue_draws (
	sale_id        VARCHAR(64) NOT NULL,
	seed           VARCHAR(64) NOT NULL,
	tickets        MEDIUMTEXT  NOT NULL,
	recorded_at_ms BIGINT      NOT NULL,
	PRIMARY KEY (sale_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
