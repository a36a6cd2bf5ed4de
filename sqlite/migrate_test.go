package sqlite_test

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/storetest"
)

// TestMigrate runs the migration suite the server databases pass: several
// handles migrating one new file at once (a `flashsale migrate` beside a
// starting server) each apply every migration once.
func TestMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flashsale.db")
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	storetest.RunMigrate(t, func(ctx context.Context) (storetest.Migrator, error) {
		return sqlite.Open(ctx, path, slog.New(slog.DiscardHandler))
	}, func(ctx context.Context, m storetest.Migrator) (int, error) {
		pending, err := m.(*sqlite.Store).PendingMigrations(ctx)
		return len(files) - len(pending), err
	}, len(files))
}

// TestMigrateOverSales runs the waiting room's migrations (0011's column,
// 0012's queue records), the stay rules' (0013) and the kinds' (0014) over
// a sale from before them (storetest.RunMigrateOverSales): the database is taken back through
// a connection of its own, as an older binary would have left it.
func TestMigrateOverSales(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flashsale.db")
	storetest.RunMigrateOverSales(t, mustOpenPath(t, path), func(ctx context.Context, _ *sqlite.Store) error {
		db, err := sql.Open("sqlite", path)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `DROP TABLE queue_places; DROP TABLE queue_draws; ALTER TABLE sales DROP COLUMN waiting_room;
			ALTER TABLE sales DROP COLUMN stay_rules;
			ALTER TABLE sales DROP COLUMN kind; ALTER TABLE nights DROP COLUMN start_time; ALTER TABLE nights DROP COLUMN minutes;
			DELETE FROM schema_migrations WHERE version IN ('0011_waiting_room', '0012_queue_records', '0013_stay_rules', '0014_sale_kinds')`)
		return err
	})
}
