package storetest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/forcetest"
	"github.com/flashsale/flashsale/modetest"
)

// ServerStore is what Server needs of an SQL server's store: it applies
// its own migrations and plays every role, the boards included.
type ServerStore interface {
	Migrator
	Roles() flashsale.Store
}

// Server is an SQL server's store under test (MySQL, PostgreSQL, S being
// the package's *Store): how its tests open one on a database of their own,
// and the few things the shared checks reach past the Store interface.
// Its Run is the suite such a store passes; its MustOpen is the opener the
// package's own tests share.
type Server[S ServerStore] struct {
	// Open is the package's Open.
	Open func(ctx context.Context, url string, logger *slog.Logger) (S, error)
	// Database creates a database of the test's own, empty and dropped
	// when the test ends, and returns its URL.
	Database func(tb testing.TB) string
	// BadURLs are URLs Open must refuse: another engine's, one without a
	// database or a server, one that does not parse.
	BadURLs []string
	// Migrations counts the migrations s has recorded as applied.
	Migrations func(ctx context.Context, s S) (int, error)
	// HoldNoticeLock begins another writer's transaction on s's database
	// that takes the outbox's lock and inserts a notice (see
	// RunNoticeOrder), rolled back when tb ends unless commit ran.
	HoldNoticeLock func(tb testing.TB, s S) (commit func() error, err error)
	// NoticeLockWaited reports whether a transaction on s's database
	// waits for the outbox's lock.
	NoticeLockWaited func(ctx context.Context, s S) (bool, error)
	// Previous takes s's database back to the schema before the last
	// migration (see RunMigrateOverSales).
	Previous func(ctx context.Context, s S) error
}

// MustOpen opens a migrated store on a fresh database that is dropped
// when the test ends.
func (srv Server[S]) MustOpen(tb testing.TB) S {
	tb.Helper()
	return srv.MustOpenAt(tb, srv.Database(tb))
}

// MustOpenAt opens another store on the database url names, as another
// instance of a deployment would (see MustOpen, the package function).
func (srv Server[S]) MustOpenAt(tb testing.TB, url string) S {
	tb.Helper()
	return MustOpen(tb, srv.Open, url)
}

// Store opens a fresh store (MustOpen) in the roles the service takes: an
// OpenFunc, for Run and the benchmarks.
func (srv Server[S]) Store(tb testing.TB) flashsale.Store {
	tb.Helper()
	return srv.MustOpen(tb).Roles()
}

// Run runs every check an SQL server's store passes, each as a subtest of
// t: the whole suite (Run), then Open's refusals, the concurrent
// migration (RunMigrate), the last migration over a sale
// (RunMigrateOverSales), the mode and force boards (modetest, forcetest:
// two instances on one database for the force board) and the outbox's
// commit order (RunNoticeOrder).
func (srv Server[S]) Run(t *testing.T) {
	Run(t, srv.Store)
	t.Run("Open", srv.testOpen)
	t.Run("Migrate", srv.testMigrate)
	t.Run("MigrateOverSales", func(t *testing.T) { RunMigrateOverSales(t, srv.MustOpen(t), srv.Previous) })
	t.Run("ModeBoard", func(t *testing.T) {
		modetest.Run(t, func(tb testing.TB) flashsale.ModeBoard { return srv.Store(tb).Modes })
	})
	t.Run("ForceBoard", func(t *testing.T) {
		forcetest.Run(t, func(tb testing.TB) (a, b flashsale.ForceBoard) {
			url := srv.Database(tb)
			return srv.MustOpenAt(tb, url).Roles().Forces, srv.MustOpenAt(tb, url).Roles().Forces
		})
	})
	t.Run("NoticeOrder", srv.testNoticeOrder)
}

// testOpen checks that Open refuses every one of BadURLs.
func (srv Server[S]) testOpen(t *testing.T) {
	for _, u := range srv.BadURLs {
		if _, err := srv.Open(t.Context(), u, nil); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

// testMigrate runs RunMigrate on a fresh database: every migration of the
// package's migrations directory recorded once.
func (srv Server[S]) testMigrate(t *testing.T) {
	url := srv.Database(t)
	RunMigrate(t, func(ctx context.Context) (Migrator, error) {
		return srv.Open(ctx, url, nil)
	}, func(ctx context.Context, m Migrator) (int, error) {
		return srv.Migrations(ctx, m.(S))
	}, MigrationFiles(t))
}

// testNoticeOrder holds the outbox's lock in another transaction with a
// notice inserted: a store transaction must wait for it (see
// RunNoticeOrder).
func (srv Server[S]) testNoticeOrder(t *testing.T) {
	s := srv.MustOpen(t)
	RunNoticeOrder(t, s.Roles(), func() (func() error, error) {
		return srv.HoldNoticeLock(t, s)
	}, func() (bool, error) {
		return srv.NoticeLockWaited(t.Context(), s)
	})
}

// MigrationFiles counts the migrations of the package under test, the
// *.sql files of its migrations directory (a test runs in its package's
// directory), each to be recorded once.
func MigrationFiles(tb testing.TB) int {
	tb.Helper()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		tb.Fatalf("migrations: %v", err)
	}
	return len(files)
}
