-- The sell mode the instances agree on while the stock engine is out (see
-- flashsale.ModeBoard): one row, and each instance's last report.
CREATE TABLE IF NOT EXISTS sell_mode (
	id            SMALLINT    NOT NULL PRIMARY KEY,
	phase         VARCHAR(16) NOT NULL,
	epoch         BIGINT      NOT NULL,
	changed_at_ms BIGINT      NOT NULL
);

INSERT INTO sell_mode (id, phase, epoch, changed_at_ms) VALUES (1, 'engine', 0, 0) ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS sell_parts (
	instance      VARCHAR(64) NOT NULL PRIMARY KEY,
	phase         VARCHAR(16) NOT NULL,
	epoch         BIGINT      NOT NULL,
	selling       VARCHAR(8)  NOT NULL,
	expires_at_ms BIGINT      NOT NULL
);
