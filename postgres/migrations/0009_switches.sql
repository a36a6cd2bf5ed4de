-- The operators' runtime switches every instance follows (issue 9): one
-- row; breaker_force is the breaker override (flashsale.ForceBoard), and
-- the CHECK keeps anything else out, whoever writes it.
CREATE TABLE IF NOT EXISTS switches (
	id            SMALLINT   NOT NULL PRIMARY KEY,
	breaker_force VARCHAR(8) NOT NULL CHECK (breaker_force IN ('auto', 'open', 'closed')),
	changed_at_ms BIGINT     NOT NULL
);

INSERT INTO switches (id, breaker_force, changed_at_ms) VALUES (1, 'auto', 0) ON CONFLICT (id) DO NOTHING;
