package sqlite

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/internal/sqlrows"
)

// PendingMigrations implements flashsale.Store: the embedded migrations
// whose version (the file name without .sql) schema_migrations lacks.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	defer rows.Close()
	applied := map[string]bool{}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("pending migrations: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	pending, err := sqlrows.PendingMigrations(migrations, func(name string) bool { return applied[name] })
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	return pending, nil
}
