package mysql

import (
	"context"
	"fmt"
	"slices"

	"github.com/flashsale/flashsale/internal/sqlrows"
)

// PendingMigrations implements flashsale.Store: the embedded migrations
// whose version (the number their name starts with) schema_migrations
// lacks.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	var versions []int
	rows, err := s.db.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", down(err))
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("pending migrations: %w", down(err))
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", down(err))
	}
	pending, err := sqlrows.PendingMigrations(migrations, func(name string) bool {
		return slices.Contains(versions, sqlrows.MigrationNumber(name))
	})
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	return pending, nil
}
