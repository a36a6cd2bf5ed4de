package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/internal/sqlrows"
)

// PendingMigrations implements flashsale.Store: the embedded migrations
// whose version (the number their name starts with) schema_migrations
// lacks.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	pending, err := sqlrows.PendingMigrations(migrations, func(name string) bool {
		return slices.Contains(versions, int32(sqlrows.MigrationNumber(name)))
	})
	if err != nil {
		return nil, fmt.Errorf("pending migrations: %w", err)
	}
	return pending, nil
}
