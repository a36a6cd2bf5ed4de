-- The operators' runtime switches every instance follows (issue 9): one
-- row; breaker_force is the breaker override (flashsale.ForceBoard), and
-- the CHECK keeps anything else out, whoever writes it (as bytes: the
-- collation would take 'open ' for 'open').
CREATE TABLE IF NOT EXISTS switches (
	id            TINYINT    NOT NULL,
	breaker_force VARCHAR(8) NOT NULL CHECK (CAST(breaker_force AS BINARY) IN ('auto', 'open', 'closed')),
	changed_at_ms BIGINT     NOT NULL,
	PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO switches (id, breaker_force, changed_at_ms) VALUES (1, 'auto', 0);
