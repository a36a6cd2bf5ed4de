package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/storetest"
)

// server is how these tests open a PostgreSQL store: on a database of the
// test's own (MustCreateDatabase).
var server = storetest.Server[*postgres.Store]{
	Open:             postgres.Open,
	Database:         MustCreateDatabase,
	BadURLs:          []string{"mysql://x@localhost/db", "postgres://nobody@127.0.0.1:1/db", "::"},
	Migrations:       recordedMigrations,
	HoldNoticeLock:   holdNoticeLock,
	NoticeLockWaited: noticeLockWaited,
	Previous:         previousSchema,
}

// TestStore runs the suite of the SQL servers' stores (storetest.Server).
func TestStore(t *testing.T) { server.Run(t) }

// previousSchema undoes the kinds' migration (0014's kind, start_time and
// minutes), the stay rules' (0013's stay_rules) and the waiting room's,
// 0012's queue records and 0011's waiting_room: the schema of a release
// from before them, which RunMigrateOverSales checks a sale of reads back
// as a stay without any of them after Migrate.
func previousSchema(ctx context.Context, s *postgres.Store) error {
	_, err := s.Pool().Exec(ctx, `DROP TABLE queue_places; DROP TABLE queue_draws; ALTER TABLE sales DROP COLUMN waiting_room;
		ALTER TABLE sales DROP COLUMN stay_rules; ALTER TABLE sales DROP COLUMN kind;
		ALTER TABLE nights DROP COLUMN start_time, DROP COLUMN minutes;
		DELETE FROM schema_migrations WHERE version IN (11, 12, 13, 14)`)
	return err
}

// recordedMigrations counts the rows of schema_migrations.
func recordedMigrations(ctx context.Context, s *postgres.Store) (n int, err error) {
	err = s.Pool().QueryRow(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&n)
	return n, err
}

// MustCreateDatabase returns the URL of a fresh, empty database named
// fs_<random> on the test server, dropped (WITH FORCE) when the test ends.
// CREATE DATABASE is the slow part of every test here, so databases are made
// ahead of time in the background while earlier tests run, and dropped in the
// background too; TestMain waits for both.
func MustCreateDatabase(tb testing.TB) string {
	tb.Helper()
	base := testenv.URL(tb, testenv.Postgres)
	dbs.once.Do(func() { dbs.start(base) })
	d, ok := <-dbs.fresh
	if !ok {
		tb.Fatal("database factory stopped")
	}
	if d.err != nil {
		tb.Fatal(d.err)
	}
	tb.Cleanup(func() { dbs.drop(d.name) })
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + d.name
	return u.String()
}

// dbs is the background database factory behind MustCreateDatabase.
var dbs factory

type factory struct {
	once  sync.Once
	base  string
	fresh chan freshDB
	stop  chan struct{}
	wg    sync.WaitGroup
}

type freshDB struct {
	name string
	err  error
}

func (f *factory) start(base string) {
	f.base = base
	f.fresh = make(chan freshDB, 2)
	f.stop = make(chan struct{})
	f.wg.Go(func() {
		defer close(f.fresh)
		for {
			name, err := f.exec("CREATE DATABASE ", "")
			select {
			case f.fresh <- freshDB{name, err}:
			case <-f.stop:
				if err == nil {
					f.exec("DROP DATABASE IF EXISTS ", name)
				}
				return
			}
		}
	})
}

// exec runs CREATE or DROP DATABASE on the base database. An empty name
// means a new random one.
func (f *factory) exec(stmt, name string) (string, error) {
	if name == "" {
		name = testenv.Name("fs_")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	suffix := ""
	if strings.HasPrefix(stmt, "DROP") {
		suffix = " WITH (FORCE)"
	}
	_, err = conn.Exec(ctx, stmt+name+suffix)
	return name, err
}

func (f *factory) drop(name string) {
	f.wg.Go(func() {
		if _, err := f.exec("DROP DATABASE IF EXISTS ", name); err != nil {
			fmt.Fprintf(os.Stderr, "drop test database %s: %v\n", name, err)
		}
	})
}

// close stops the factory, drops what it made ahead and waits for every drop.
func (f *factory) close() {
	if f.stop == nil {
		return
	}
	close(f.stop)
	for d := range f.fresh {
		if d.err == nil {
			f.exec("DROP DATABASE IF EXISTS ", d.name)
		}
	}
	f.wg.Wait()
}

func TestMain(m *testing.M) {
	code := m.Run()
	dbs.close()
	os.Exit(code)
}

// TestOpen checks that Open takes the postgresql:// scheme too (the URLs
// it must refuse are the server's BadURLs, checked by TestStore/Open).
func TestOpen(t *testing.T) {
	t.Run("postgresql", func(t *testing.T) {
		u := MustCreateDatabase(t)
		s, err := postgres.Open(t.Context(), "postgresql"+strings.TrimPrefix(u, "postgres"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	})
}

// BenchmarkPlaceOrders measures the group commit at the batch sizes the
// embedded writer and the queue consumer produce.
func BenchmarkPlaceOrders(b *testing.B) {
	storetest.BenchPlaceOrders(b, server.Store)
}

// BenchmarkExpireHolds measures releasing a reaper batch of 256 holds, alone
// and against a concurrent PlaceOrders, and the per-hold way it replaced.
func BenchmarkExpireHolds(b *testing.B) {
	storetest.BenchExpireHolds(b, server.Store)
}
