package mysql_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/storetest"
)

// server is how these tests open a MySQL store: on a database of the
// test's own, created and dropped on the test server.
var server = storetest.Server[*mysql.Store]{
	Open:             mysql.Open,
	Database:         testenv.MySQLDatabase,
	BadURLs:          []string{"postgres://x@localhost/db", "mysql://root@127.0.0.1:3306", "::"},
	Migrations:       recordedMigrations,
	HoldNoticeLock:   holdNoticeLock,
	NoticeLockWaited: noticeLockWaited,
	Previous:         previousSchema,
}

// TestStore runs the suite of the SQL servers' stores (storetest.Server).
func TestStore(t *testing.T) { server.Run(t) }

// TestMigrateInterrupted checks that a migration whose DDL was committed
// but not recorded (MySQL commits DDL implicitly, so a crash in between
// leaves exactly that) runs again without error: 0002, and 0014's three
// guarded ALTERs.
func TestMigrateInterrupted(t *testing.T) {
	ctx := t.Context()
	s := server.MustOpen(t)
	if _, err := s.DB().ExecContext(ctx, "DELETE FROM schema_migrations WHERE version IN (2, 14)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after an unrecorded 0002 and 0014: %v", err)
	}
	if n, err := recordedMigrations(ctx, s); err != nil || n != storetest.MigrationFiles(t) {
		t.Errorf("migrations recorded = %d, %v, want %d", n, err, storetest.MigrationFiles(t))
	}
}

// previousSchema undoes the kinds' migration (0014's kind, start_time and
// minutes), the stay rules' (0013's stay_rules) and the waiting room's,
// 0012's queue records and 0011's waiting_room: the schema of a release
// from before them, which RunMigrateOverSales checks a sale of reads back
// as a stay without any of them after Migrate.
func previousSchema(ctx context.Context, s *mysql.Store) error {
	for _, q := range []string{"DROP TABLE queue_places", "DROP TABLE queue_draws", "ALTER TABLE sales DROP COLUMN waiting_room",
		"ALTER TABLE sales DROP COLUMN stay_rules", "ALTER TABLE sales DROP COLUMN kind",
		"ALTER TABLE nights DROP COLUMN start_time, DROP COLUMN minutes",
		"DELETE FROM schema_migrations WHERE version IN (11, 12, 13, 14)"} {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// recordedMigrations counts the rows of schema_migrations.
func recordedMigrations(ctx context.Context, s *mysql.Store) (n int, err error) {
	err = s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&n)
	return n, err
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

// syncBuffer is a bytes.Buffer that a logger may write from one goroutine
// while the test reads it from another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestPlaceOrdersDeadlock makes a PlaceOrders batch the victim of a real
// deadlock: another transaction locks the night first, the batch locks its
// user's row and waits for the night, then the other transaction asks for
// that user's row. The batch must be rerun from the start (its results are
// those of the rerun, not of the attempt that was rolled back), log the
// retry, and leave the books right.
func TestPlaceOrdersDeadlock(t *testing.T) {
	ctx := t.Context()
	var logs syncBuffer
	s, err := mysql.Open(ctx, server.Database(t), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	sale := fixture.Sale(fixture.ID("s1"), fixture.Stock(10), fixture.Price(1, 2), fixture.Limit(5),
		fixture.Window(time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatal(err)
	}
	hold := time.Now().Add(time.Minute)
	r := func(id string) flashsale.Reservation {
		return flashsale.Reservation{OrderID: id, SaleID: "s1", UserID: "u1", Nights: 1, Rooms: 1, HoldExpiresAt: hold}
	}
	if errs, err := s.PlaceOrders(ctx, []flashsale.Reservation{r("o0")}); err != nil || errs[0] != nil {
		t.Fatalf("PlaceOrders(o0) = %v, %v", errs, err)
	}

	// The other transaction weighs more (it has changed more rows), so
	// InnoDB picks the batch as the victim.
	other, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	for i := range 20 {
		if _, err := other.ExecContext(ctx, "INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES ('zz', ?, 1)", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.ExecContext(ctx, "SELECT * FROM nights WHERE sale_id = 's1' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	var (
		wg       sync.WaitGroup
		results  []error
		placeErr error
	)
	wg.Go(func() { results, placeErr = s.PlaceOrders(ctx, []flashsale.Reservation{r("o1"), r("o2")}) })

	// Wait until the batch waits to lock the night (phase 2 locks the
	// sale's nights before it takes any), holding u1's row.
	var dbName string
	if err := s.DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = ? AND INFO LIKE '%FROM nights%FOR UPDATE'`, dbName).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the night")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Closing the cycle makes the batch the victim; this statement then
	// goes through. While the batch backs off, o2 appears, so its rerun
	// must find o2 a duplicate where the first attempt had placed it.
	if _, err := other.ExecContext(ctx, "UPDATE user_rooms SET rooms = rooms WHERE sale_id = 's1' AND user_id = 'u1' AND rooms >= 0"); err != nil {
		t.Fatalf("other transaction: %v (it, not the batch, was the deadlock victim?)", err)
	}
	if _, err := other.ExecContext(ctx, `INSERT INTO orders (id, sale_id, user_id, status, first_night, nights, rooms,
		amount, currency, hold_expires_at_ms, created_at_ms, updated_at_ms)
		VALUES ('o2', 's1', 'u9', 'cancelled', 0, 1, 1, 0, 'CNY', 0, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if placeErr != nil {
		t.Fatalf("PlaceOrders: %v", placeErr)
	}
	if diff := cmp.Diff([]error{nil, flashsale.ErrDuplicate}, results, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("PlaceOrders results mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), `msg="deadlock, retrying transaction" op=place_orders`) {
		t.Errorf("no deadlock retry logged:\n%s", logs.String())
	}
	nights, err := s.NightStocks(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nights[0].Held, 2; got != want {
		t.Errorf("held = %d, want %d (o0 and o1)", got, want)
	}
	var rooms int
	if err := s.DB().QueryRowContext(ctx, "SELECT rooms FROM user_rooms WHERE sale_id = 's1' AND user_id = 'u1'").Scan(&rooms); err != nil {
		t.Fatal(err)
	}
	if got, want := rooms, 2; got != want {
		t.Errorf("u1 rooms = %d, want %d", got, want)
	}
}
