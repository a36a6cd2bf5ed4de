package funnel_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
)

func sqlStores(t *testing.T) map[string]func(t *testing.T) flashsale.Store {
	return map[string]func(t *testing.T) flashsale.Store{
		"MySQL": func(t *testing.T) flashsale.Store {
			s, err := mysql.Open(t.Context(), testenv.MySQLDatabase(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s.Roles()
		},
		"PostgreSQL": func(t *testing.T) flashsale.Store {
			s, err := postgres.Open(t.Context(), testenv.PostgresDatabase(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s.Roles()
		},
	}
}

// flakyBoard is a board whose beats can be made to fail (the database
// out of reach for this instance alone).
type flakyBoard struct {
	flashsale.ModeBoard
	down atomic.Bool
}

func (b *flakyBoard) Beat(ctx context.Context, p flashsale.SellPart, lease time.Duration) (flashsale.SellMode, error) {
	if b.down.Load() {
		return flashsale.SellMode{}, flashsale.ErrUnavailable
	}
	return b.ModeBoard.Beat(ctx, p, lease)
}

// dbModeEnv is one instance in db mode: the in-process engine behind a
// breaker the test forces open and closed, the group-commit writer, a SQL
// store and its board.
type dbModeEnv struct {
	*env
	brk   *breaker.Engine
	board *flakyBoard
}

func openDBMode(t *testing.T, open func(t *testing.T) flashsale.Store) *dbModeEnv {
	t.Helper()
	store := open(t)
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	engine := inmem.NewEngine()
	brk := breaker.New(engine.Roles(), breaker.Config{})
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	board := &flakyBoard{ModeBoard: store.Modes}
	store.Modes = board
	c := newClock()
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: store, Engine: brk.Roles(), Writer: writer,
		SellLease: 1500 * time.Millisecond,
		Secret:    []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour, AuditInterval: -1,
	})
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	e := &env{svc: svc, store: store, engine: engine, writer: writer, clock: c}
	t.Cleanup(func() { e.close(t) })
	return &dbModeEnv{env: e, brk: brk, board: board}
}

// waitSelling waits until the instance sells from want.
func (e *dbModeEnv) waitSelling(t *testing.T, want flashsale.Selling) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.svc.Ready(t.Context()).Selling != want {
		if time.Now().After(deadline) {
			t.Fatalf("still selling from %s after 10 s, want %s", e.svc.Ready(t.Context()).Selling, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDBMode walks one sale through the breaker's db mode: sold from the
// engine, then (breaker forced open) from the database, then (breaker
// back) from the engine rebuilt from the database, which must know every
// room the database sold meanwhile: the sale sells out at exactly its
// stock, with no order failed. In db mode a purchase token buys once, an
// idempotency key names one order, and the user's limit holds.
func TestDBMode(t *testing.T) {
	for name, open := range sqlStores(t) {
		t.Run(name, func(t *testing.T) {
			e := openDBMode(t, open)
			ctx := t.Context()
			sale := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 2 }, 10)
			user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprint("u", i)} }
			sold := 0
			buy := func(i int, status flashsale.OrderStatus) {
				t.Helper()
				o, err := e.buy(t, user(i), flashsale.PurchaseRequest{SaleID: sale.ID})
				if err != nil || o.Status != status {
					t.Fatalf("purchase %d: %+v, %v; want %s", i, o, err, status)
				}
				sold++
			}
			for i := range 3 {
				buy(i, flashsale.OrderHeld)
			}

			if err := e.brk.Force(flashsale.BreakerForceOpen); err != nil {
				t.Fatal(err)
			}
			e.waitSelling(t, flashsale.SellingDB)
			for i := 3; i < 6; i++ {
				buy(i, flashsale.OrderHeld)
			}
			if avail, _ := e.engine.Available(ctx, sale.ID); avail[0] != 7 {
				t.Fatalf("engine available %v while selling from the database, want the 7 it had", avail)
			}
			// A token buys once.
			u := user(100)
			tok := e.token(t, u, sale.ID)
			if _, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID, Token: tok}); err != nil {
				t.Fatal(err)
			}
			sold++
			_, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID, Token: tok})
			wantErr(t, err, flashsale.ErrTokenInvalid)
			// A key names one order, and the limit holds (2 per user).
			u = user(101)
			first, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k1"})
			if err != nil {
				t.Fatal(err)
			}
			sold++
			again, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k1"})
			if err != nil || again.ID != first.ID {
				t.Fatalf("retry with the key: %+v, %v; want order %s", again, err, first.ID)
			}
			_, err = e.buy(t, u, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k1", Rooms: 2})
			wantErr(t, err, flashsale.ErrKeyReused)
			if _, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
				t.Fatal(err)
			}
			sold++
			for range 3 { // the first is a failed row, the others cost no write
				_, err = e.buy(t, u, flashsale.PurchaseRequest{SaleID: sale.ID})
				wantErr(t, err, flashsale.ErrLimitExceeded)
			}

			if err := e.brk.Force(flashsale.BreakerAuto); err != nil {
				t.Fatal(err)
			}
			e.waitSelling(t, flashsale.SellingEngine)
			if avail, _ := e.engine.Available(ctx, sale.ID); avail[0] != 10-sold {
				t.Fatalf("engine available %v after the return, want %d: the rebuild must count what the database sold", avail, 10-sold)
			}
			for i := 200; sold < 10; i++ {
				buy(i, flashsale.OrderHeld)
			}
			_, err = e.buy(t, user(300), flashsale.PurchaseRequest{SaleID: sale.ID})
			wantErr(t, err, flashsale.ErrSoldOut)
			snap, err := e.store.Snapshot(ctx, sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			active, failed := 0, 0
			for _, r := range snap.Reservations {
				if r.Active {
					active += r.Rooms
				} else {
					failed++
				}
			}
			// The one failed row is the refusal over the limit: in db mode
			// the database's refusal is the answer, and a refused order is
			// a row.
			if active != 10 || failed != 1 {
				t.Fatalf("%d rooms taken, %d orders failed; want 10 and the one refused over the limit", active, failed)
			}
		})
	}
}

// TestDBModeLease: an instance that cannot beat stops selling from the
// engine once its lease may have run out, on its own, and sells again
// when it can beat.
func TestDBModeLease(t *testing.T) {
	e := openDBMode(t, sqlStores(t)["MySQL"])
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 10)
	u := flashsale.User{ID: "alice"}
	if _, err := e.svc.Purchase(t.Context(), u, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
	e.board.down.Store(true)
	e.waitSelling(t, flashsale.SellingNone)
	_, err := e.svc.Purchase(t.Context(), flashsale.User{ID: "bob"}, flashsale.PurchaseRequest{SaleID: sale.ID})
	if wait, ok := flashsale.RetryAfter(err); !errors.Is(err, flashsale.ErrUnavailable) || !ok || wait <= 0 {
		t.Fatalf("purchase with the lease run out: %v, want unavailable with Retry-After", err)
	}
	if r := e.svc.Ready(t.Context()); r.Ready {
		t.Fatalf("ready with the lease run out: %+v", r)
	}
	e.board.down.Store(false)
	e.waitSelling(t, flashsale.SellingEngine)
	if _, err := e.svc.Purchase(t.Context(), flashsale.User{ID: "bob"}, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
}
