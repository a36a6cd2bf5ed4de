-- The waiting rooms' records (issue 24, item 6): what a queue lost with
-- its process is rebuilt from (flashsale.QueueRecords). One row per place
-- (sale, user): its ticket, its rank in the order (0 before the draw), when
-- it was taken, and how far it got: admitted until (NULL until admitted),
-- skipped at its turn, its admission used. Times are unix milliseconds.
-- No foreign key to sales: a place is recorded before its guest is told,
-- whatever else the sale's rows are doing.
CREATE TABLE queue_places (
	sale_id           TEXT    NOT NULL,
	user_id           TEXT    NOT NULL,
	ticket            TEXT    NOT NULL,
	place_rank        INTEGER NOT NULL,
	joined_at_ms      INTEGER NOT NULL,
	admitted_until_ms INTEGER NULL,
	skipped           INTEGER NOT NULL DEFAULT 0,
	used              INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (sale_id, user_id)
) STRICT;

-- A sale's draw, the first recorded: its seed and its sorted tickets,
-- newline-joined. Its order (DrawOrder) and its commitment
-- (DrawCommitment) are recomputed from them when read.
CREATE TABLE queue_draws (
	sale_id        TEXT    NOT NULL PRIMARY KEY,
	seed           TEXT    NOT NULL,
	tickets        TEXT    NOT NULL,
	recorded_at_ms INTEGER NOT NULL
) STRICT;
