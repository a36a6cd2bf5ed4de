package funnel_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
)

// clock is a settable time source so holds and tokens expire on command.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a Service over the real embedded parts: SQLite, the in-process
// engine and the group-commit writer.
type env struct {
	svc    *funnel.Service
	store  flashsale.Store
	engine *inmem.Engine
	writer *inmem.Writer
	clock  *clock
	path   string
}

// t0 is the package's start, for fixed times in tests. A test's clock
// starts at its own now (newClock), not at t0: the engines forget spent
// purchase tokens by the wall clock, so a clock started at t0 made a spent
// token look unspent once the package had run longer than a token's TTL
// (CI's funnel run passed 120 s and TestPurchaseTokenRefused's reused
// token was accepted).
var t0 = time.Now().UTC().Truncate(time.Second)

// newClock is a test clock starting at the wall clock's now.
func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Second)} }

func mustOpen(tb testing.TB) *env {
	tb.Helper()
	return mustOpenAt(tb, filepath.Join(tb.TempDir(), "fs.db"), newClock())
}

// mustSQLite opens and migrates a SQLite store at path; the caller closes it.
func mustSQLite(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return store
}

func mustOpenAt(tb testing.TB, path string, c *clock) *env {
	tb.Helper()
	return mustOpenWith(tb, path, c, nil)
}

// mustOpenWith is mustOpenAt with mod's changes to the Service's Config.
func mustOpenWith(tb testing.TB, path string, c *clock, mod func(*funnel.Config)) *env {
	tb.Helper()
	ctx := context.Background()
	store := mustSQLite(tb, path)
	engine := inmem.NewEngine()
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	testenv.Load(tb) // a load a timed test waits out (testenv.Alone)
	cfg := funnel.Config{
		Store: store.Roles(), Engine: engine.Roles(), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour,
	}
	if mod != nil {
		mod(&cfg)
	}
	svc := funnel.New(cfg)
	if err := svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	e := &env{svc: svc, store: store.Roles(), engine: engine, writer: writer, clock: c, path: path}
	tb.Cleanup(func() { e.close(tb) })
	return e
}

func (e *env) close(tb testing.TB) {
	if e.svc == nil {
		return
	}
	e.svc.Close()
	e.writer.Close()
	e.store.Close()
	e.svc = nil
}

// sale creates an active sale (started a minute ago) with the given stock
// per night and a purchase token; mod, if any, changes it before it is
// created.
func (e *env) sale(tb testing.TB, mod func(*flashsale.Sale), stock ...int) *flashsale.Sale {
	tb.Helper()
	s := fixture.Sale(fixture.Stock(stock...), fixture.OpenAt(e.clock.Now()), fixture.Token())
	if mod != nil {
		mod(s)
	}
	s, err := e.svc.CreateSale(context.Background(), s)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (e *env) token(tb testing.TB, u flashsale.User, saleID string) string {
	tb.Helper()
	tok, err := e.svc.IssueToken(context.Background(), u, flashsale.TokenRequest{SaleID: saleID})
	if err != nil {
		tb.Fatal(err)
	}
	return tok.Token
}

// buy issues a token and purchases with it.
func (e *env) buy(tb testing.TB, u flashsale.User, req flashsale.PurchaseRequest) (*flashsale.Order, error) {
	tb.Helper()
	req.Token = e.token(tb, u, req.SaleID)
	return e.svc.Purchase(context.Background(), u, req)
}

// nights returns the database's counters and checks them against the engine
// and against the orders (I1, and database == engine).
func (e *env) nights(tb testing.TB, saleID string) []flashsale.NightStock {
	tb.Helper()
	ctx := context.Background()
	ns, err := e.store.NightStocks(ctx, saleID)
	if err != nil {
		tb.Fatal(err)
	}
	avail, err := e.engine.Available(ctx, saleID)
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := e.store.Snapshot(ctx, saleID)
	if err != nil {
		tb.Fatal(err)
	}
	taken := make([]int, len(ns))
	for _, r := range snap.Reservations {
		if r.Active {
			for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
				taken[i] += r.Rooms
			}
		}
	}
	for i, n := range ns {
		if n.Held+n.Sold > n.Stock || n.Available < 0 {
			tb.Errorf("night %s oversold: %+v", n.Date, n)
		}
		if n.Held+n.Sold != taken[i] {
			tb.Errorf("night %s: held+sold=%d, active orders take %d", n.Date, n.Held+n.Sold, taken[i])
		}
		if avail[i] != n.Available {
			tb.Errorf("night %s: engine available %d, database %d", n.Date, avail[i], n.Available)
		}
	}
	return ns
}

func wantErr(tb testing.TB, err, want error) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Fatalf("err = %v, want %v", err, want)
	}
}

var (
	alice = flashsale.User{ID: "alice", Tier: flashsale.TierGold}
	bob   = flashsale.User{ID: "bob", Tier: flashsale.TierBasic}
	carol = flashsale.User{ID: "carol"}
)

func TestPurchase(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 5)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != flashsale.OrderHeld || o.Amount != 39900 || o.Currency != "CNY" || o.CheckIn != testenv.Night(0) {
			t.Fatalf("order = %+v", o)
		}
		if got, want := o.HoldExpiresAt, e.clock.Now().Add(30*time.Second); !got.Equal(want) {
			t.Fatalf("hold expires %v, want %v", got, want)
		}
		got, err := e.svc.Order(context.Background(), alice, o.ID)
		if err != nil || got.Status != flashsale.OrderHeld {
			t.Fatalf("order = %+v, %v", got, err)
		}
		if _, err := e.svc.Order(context.Background(), bob, o.ID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("someone else's order: %v", err)
		}
		if n := e.nights(t, s.ID)[0]; n.Held != 1 || n.Available != 4 {
			t.Fatalf("night = %+v", n)
		}
	})
	t.Run("MultiNightAllOrNothing", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 2 }, 2, 1, 2)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(1), Nights: 2})
		if err != nil {
			t.Fatal(err)
		}
		if o.Amount != 2*39900 {
			t.Fatalf("amount = %d", o.Amount)
		}
		_, err = e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(0), Nights: 3})
		wantErr(t, err, flashsale.ErrSoldOut)
		ns := e.nights(t, s.ID)
		if got := []int{ns[0].Available, ns[1].Available, ns[2].Available}; got[0] != 2 || got[1] != 0 || got[2] != 1 {
			t.Fatalf("available = %v, want [2 0 1]", got)
		}
		// The first night alone is still for sale, two rooms of it.
		if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID, Rooms: 2}); err != nil {
			t.Fatal(err)
		}
		_, err = e.buy(t, carol, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(2), Nights: 2})
		if flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Fatalf("stay past the sale: %v", err)
		}
		e.nights(t, s.ID)
	})
	t.Run("ErrLimitExceeded", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 2 }, 10)
		if _, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
		_, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, Rooms: 2})
		wantErr(t, err, flashsale.ErrLimitExceeded)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrLimitExceeded)
		// Cancelling frees the limit.
		if _, err := e.svc.Cancel(context.Background(), alice, o.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
		if n := e.nights(t, s.ID)[0]; n.Held != 2 {
			t.Fatalf("held = %d", n.Held)
		}
	})
	t.Run("Window", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.StartsAt = e.clock.Now().Add(time.Minute) }, 5)
		_, err := e.svc.IssueToken(context.Background(), alice, flashsale.TokenRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrNotStarted)
		_, err = e.svc.Purchase(context.Background(), alice, flashsale.PurchaseRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrNotStarted)
		e.clock.Advance(2 * time.Hour)
		_, err = e.svc.IssueToken(context.Background(), alice, flashsale.TokenRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrEnded)
		_, err = e.svc.Purchase(context.Background(), alice, flashsale.PurchaseRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrEnded)
		_, err = e.svc.Purchase(context.Background(), alice, flashsale.PurchaseRequest{SaleID: "nope"})
		wantErr(t, err, flashsale.ErrNotFound)
	})
	t.Run("ErrNotEligible", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.Eligibility.MinTier = flashsale.TierGold }, 5)
		_, err := e.svc.IssueToken(context.Background(), bob, flashsale.TokenRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrNotEligible)
		if _, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("NoToken", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 5)
		if _, err := e.svc.Purchase(context.Background(), alice, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestIdempotency(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 3 }, 5, 5)
	req := flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k1", Token: e.token(t, alice, s.ID)}
	first, err := e.svc.Purchase(ctx, alice, req)
	if err != nil {
		t.Fatal(err)
	}
	// The same request again, spent token included: the same order, nothing more taken.
	for range 3 {
		again, err := e.svc.Purchase(ctx, alice, req)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID {
			t.Fatalf("replay gave order %s, want %s", again.ID, first.ID)
		}
	}
	// The same key for another purchase is the client's mistake: refused,
	// with its own code, and nothing taken (Stripe's rule).
	for _, changed := range []func(*flashsale.PurchaseRequest){
		func(r *flashsale.PurchaseRequest) { r.Rooms = 2 },
		func(r *flashsale.PurchaseRequest) { r.Nights = 2 },
		func(r *flashsale.PurchaseRequest) { r.CheckIn = s.Nights[1].Date },
	} {
		other := req
		changed(&other)
		_, err := e.svc.Purchase(ctx, alice, other)
		wantErr(t, err, flashsale.ErrKeyReused)
	}
	// Another user's same key is another order.
	other, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k1"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("bob: %+v, %v", other, err)
	}
	if n := e.nights(t, s.ID)[0]; n.Held != 2 || n.Available != 3 {
		t.Fatalf("night = %+v, want held 2", n)
	}
	// Concurrent retries of one request: exactly one order.
	req = flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k2", Token: e.token(t, alice, s.ID)}
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Go(func() {
			if o, err := e.svc.Purchase(ctx, alice, req); err == nil {
				ids[i] = o.ID
			} else {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent replays gave orders %v", ids)
		}
	}
	if n := e.nights(t, s.ID)[0]; n.Held != 3 {
		t.Fatalf("held = %d, want 3", n.Held)
	}
}

func TestToken(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 5 }, 10)
	s2 := e.sale(t, nil, 10)
	tok := e.token(t, alice, s.ID)
	if _, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: tok}); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"spent":        tok,
		"missing":      "",
		"other user":   e.token(t, bob, s.ID),
		"other sale":   e.token(t, alice, s2.ID),
		"tampered":     tok[:len(tok)-2] + "AA",
		"garbage":      "not.a-token",
		"payload swap": e.token(t, bob, s.ID)[:10] + tok[10:],
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: tok})
			wantErr(t, err, flashsale.ErrTokenInvalid)
		})
	}
	t.Run("expired", func(t *testing.T) {
		tok := e.token(t, alice, s.ID)
		e.clock.Advance(funnel.TokenTTLDefault)
		_, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: tok})
		wantErr(t, err, flashsale.ErrTokenInvalid)
	})
	if n := e.nights(t, s.ID)[0]; n.Held != 1 {
		t.Fatalf("held = %d, want 1: a refused token took stock", n.Held)
	}
}

func TestHold(t *testing.T) {
	ctx := context.Background()
	t.Run("ExpiryReleasesForRebuy", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 1)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrSoldOut)
		e.clock.Advance(29 * time.Second)
		if n := e.svc.Reap(ctx); n != 0 {
			t.Fatalf("reaped %d before expiry", n)
		}
		e.clock.Advance(time.Second)
		if n := e.svc.Reap(ctx); n != 1 {
			t.Fatalf("reaped %d, want 1", n)
		}
		if n := e.svc.Reap(ctx); n != 0 {
			t.Fatalf("reaped again: %d", n)
		}
		got, _ := e.svc.Order(ctx, alice, o.ID)
		if got.Status != flashsale.OrderExpired {
			t.Fatalf("status = %s", got.Status)
		}
		if n := e.nights(t, s.ID)[0]; n.Held != 0 || n.Available != 1 {
			t.Fatalf("night = %+v", n)
		}
		if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatalf("re-buy: %v", err)
		}
		e.nights(t, s.ID)
	})
	t.Run("PaidIsIdempotent", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 1)
		o, _ := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		for range 3 {
			p, err := e.svc.MarkPaid(ctx, o.ID, "pay-1")
			if err != nil || p.Status != flashsale.OrderPaid {
				t.Fatalf("paid: %+v, %v", p, err)
			}
		}
		e.clock.Advance(time.Minute)
		e.svc.Reap(ctx)
		if n := e.nights(t, s.ID)[0]; n.Sold != 1 || n.Held != 0 {
			t.Fatalf("night = %+v", n)
		}
		_, err := e.svc.Cancel(ctx, alice, o.ID)
		if flashsale.ErrorCode(err) != flashsale.EConflict {
			t.Fatalf("cancel paid: %v", err)
		}
	})
	t.Run("PaidAfterExpiryRetakes", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 1)
		o, _ := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		e.clock.Advance(time.Minute)
		e.svc.Reap(ctx)
		p, err := e.svc.MarkPaid(ctx, o.ID, "pay-1")
		if err != nil || p.Status != flashsale.OrderPaid {
			t.Fatalf("paid after expiry: %+v, %v", p, err)
		}
		if n := e.nights(t, s.ID)[0]; n.Sold != 1 || n.Available != 0 {
			t.Fatalf("night = %+v", n)
		}
		_, err = e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID})
		wantErr(t, err, flashsale.ErrSoldOut)
	})
	t.Run("PaidAfterExpiryResold", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 1)
		o, _ := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		e.clock.Advance(time.Minute)
		e.svc.Reap(ctx)
		if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.MarkPaid(ctx, o.ID, "pay-1")
		wantErr(t, err, flashsale.ErrHoldExpired)
		got, _ := e.svc.Order(ctx, alice, o.ID)
		if got.Status != flashsale.OrderExpired {
			t.Fatalf("status = %s", got.Status)
		}
		if n := e.nights(t, s.ID)[0]; n.Held != 1 || n.Sold != 0 {
			t.Fatalf("night = %+v", n)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, nil, 1)
		o, _ := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		_, err := e.svc.Cancel(ctx, bob, o.ID)
		wantErr(t, err, flashsale.ErrNotFound)
		for range 2 {
			c, err := e.svc.Cancel(ctx, alice, o.ID)
			if err != nil || c.Status != flashsale.OrderCancelled {
				t.Fatalf("cancel: %+v, %v", c, err)
			}
		}
		if n := e.nights(t, s.ID)[0]; n.Held != 0 || n.Available != 1 {
			t.Fatalf("night = %+v", n)
		}
	})
	t.Run("ReapRacesPayment", func(t *testing.T) {
		e := mustOpen(t)
		s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 1 }, 50)
		users := make([]flashsale.User, 50)
		var ids []string
		for i := range users {
			users[i] = flashsale.User{ID: "u" + string(rune('A'+i%26)) + string(rune('a'+i/26))}
			o, err := e.buy(t, users[i], flashsale.PurchaseRequest{SaleID: s.ID})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
		e.clock.Advance(time.Minute)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { e.svc.Reap(ctx) })
		}
		for _, id := range ids {
			wg.Go(func() { e.svc.MarkPaid(ctx, id, "p") })
		}
		wg.Wait()
		e.svc.Reap(ctx)
		ns := e.nights(t, s.ID)
		if ns[0].Held != 0 {
			t.Fatalf("night = %+v", ns[0])
		}
	})
}

// TestRestart rebuilds the engine from the database: available stock, the
// per-user limit and idempotency keys all survive.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fs.db")
	c := newClock()
	e := mustOpenAt(t, path, c)
	s := e.sale(t, nil, 3)
	req := flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k", Token: e.token(t, alice, s.ID)}
	o, err := e.svc.Purchase(ctx, alice, req)
	if err != nil {
		t.Fatal(err)
	}
	e.close(t)

	e = mustOpenAt(t, path, c)
	if n := e.nights(t, s.ID)[0]; n.Available != 2 {
		t.Fatalf("after restart night = %+v", n)
	}
	again, err := e.svc.Purchase(ctx, alice, req)
	if err != nil || again.ID != o.ID {
		t.Fatalf("replay after restart: %+v, %v", again, err)
	}
	_, err = e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
	wantErr(t, err, flashsale.ErrLimitExceeded)
	err = e.svc.Preheat(ctx, s.ID)
	wantErr(t, err, flashsale.ErrAlreadyStarted)
	if n := e.nights(t, s.ID)[0]; n.Available != 2 {
		t.Fatalf("preheat after start reset stock: %+v", n)
	}
}

// TestDatabaseGuard makes the engine wrong on purpose (preheated with more
// stock than the database has): the database refuses the excess, the orders
// are failed and the units go back.
func TestDatabaseGuard(t *testing.T) {
	ctx := context.Background()
	e := mustOpen(t)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt = e.clock.Now().Add(time.Second)
		s.PurchaseToken = false
	}, 2)
	snap, err := e.store.Snapshot(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	snap.Nights[0].Available = 5
	if err := e.engine.Load(ctx, snap, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	ok, refused := 0, 0
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		_, err := e.svc.Purchase(ctx, flashsale.User{ID: u}, flashsale.PurchaseRequest{SaleID: s.ID})
		switch {
		case err == nil:
			ok++
		case errors.Is(err, flashsale.ErrSoldOut):
			refused++
		default:
			t.Fatal(err)
		}
	}
	if ok != 2 || refused != 3 {
		t.Fatalf("ok=%d refused=%d, want 2 and 3", ok, refused)
	}
	ns, _ := e.store.NightStocks(ctx, s.ID)
	if ns[0].Held != 2 {
		t.Fatalf("night = %+v", ns[0])
	}
	snap, _ = e.store.Snapshot(ctx, s.ID)
	failed := 0
	for _, r := range snap.Reservations {
		if !r.Active {
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("failed orders = %d, want 3", failed)
	}
	if avail, _ := e.engine.Available(ctx, s.ID); avail[0] != 3 {
		t.Fatalf("engine available = %d, want the 3 refused units back", avail[0])
	}
}

// countingStore counts Sale reads on a real store and makes each take as
// long as it would on a database busy with a burst.
type countingStore struct {
	flashsale.Store
	sales atomic.Int64
}

func (c *countingStore) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	c.sales.Add(1)
	time.Sleep(50 * time.Millisecond)
	return c.Store.Sale(ctx, id)
}

// TestSaleLookupCollapses: a second instance that has never seen a sale
// reads it from the database once, however many guests ask at once.
func TestSaleLookupCollapses(t *testing.T) {
	a := mustOpen(t)
	s := a.sale(t, func(s *flashsale.Sale) {
		s.StartsAt = a.clock.Now().Add(time.Hour)
		s.EndsAt = s.StartsAt.Add(time.Hour)
	}, 5)

	ctx := context.Background()
	counting := &countingStore{Store: a.store}
	writer := inmem.NewWriter(counting, inmem.WriterConfig{}, nil)
	defer writer.Close()
	// b is a second instance: it never created the sale, so only the
	// database knows it.
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	b := funnel.New(funnel.Config{
		Store: flashsale.StoreOf(counting), Engine: inmem.NewEngine().Roles(), Writer: writer,
		Secret: []byte("test-secret"), Now: a.clock.Now, ReapInterval: time.Hour,
	})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 500 {
		wg.Go(func() {
			<-start
			if _, err := b.IssueToken(ctx, alice, flashsale.TokenRequest{SaleID: s.ID}); !errors.Is(err, flashsale.ErrNotStarted) {
				t.Errorf("token: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := counting.sales.Load(); n < 1 || n > 5 {
		t.Fatalf("500 concurrent first lookups read the sale %d times, want 1 (a few if the goroutines straggle)", n)
	}
}

// flakyStore fails the next PlaceOrders transactions on purpose, as a
// database that times out would.
type flakyStore struct {
	flashsale.Store
	fail atomic.Int64
}

func (f *flakyStore) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("injected: database timed out")
	}
	return f.Store.PlaceOrders(ctx, rs)
}

// TestRetryAfterUnavailable: the order path refuses a purchase (503) and
// the units go back; the client's retry with the same Idempotency-Key and
// the same, now spent, token gets one order, not a 404 or a token error.
func TestRetryAfterUnavailable(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := mustSQLite(t, filepath.Join(t.TempDir(), "fs.db"))
	defer store.Close()
	flaky := &flakyStore{Store: store.Roles()}
	engine := inmem.NewEngine()
	writer := inmem.NewWriter(flaky, inmem.WriterConfig{}, nil)
	defer writer.Close()
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: flashsale.StoreOf(flaky), Engine: engine.Roles(), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour,
	})
	defer svc.Close()
	e := &env{svc: svc, store: store.Roles(), engine: engine, writer: writer, clock: c}
	s := e.sale(t, nil, 1)

	flaky.fail.Store(1)
	req := flashsale.PurchaseRequest{SaleID: s.ID, IdempotencyKey: "k", Token: e.token(t, alice, s.ID)}
	_, err := svc.Purchase(ctx, alice, req)
	wantErr(t, err, flashsale.ErrUnavailable)
	if n := e.nights(t, s.ID)[0]; n.Available != 1 || n.Held != 0 {
		t.Fatalf("after the refused write: %+v, want the unit back", n)
	}
	o, err := svc.Purchase(ctx, alice, req)
	if err != nil || o.Status != flashsale.OrderHeld {
		t.Fatalf("retry: %+v, %v", o, err)
	}
	again, err := svc.Purchase(ctx, alice, req)
	if err != nil || again.ID != o.ID {
		t.Fatalf("second retry: %+v, %v; want order %s", again, err, o.ID)
	}
	if n := e.nights(t, s.ID)[0]; n.Held != 1 || n.Available != 0 {
		t.Fatalf("night = %+v, want exactly one held", n)
	}
	// Another guest's retry-less attempt finds it sold out.
	_, err = e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID})
	wantErr(t, err, flashsale.ErrSoldOut)
}

// TestPriceTiers: the amount of a purchase is the tier's price per
// room-night for the rooms bought, computed by the server.
func TestPriceTiers(t *testing.T) {
	e := mustOpen(t)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.PerUserLimit = 3
		s.PriceTiers = []flashsale.PriceTier{{Rooms: 2, Price: 34900}, {Rooms: 3, Price: 32900}}
	}, 10, 10)
	for _, tt := range []struct {
		u             flashsale.User
		rooms, nights int
		want          int64
	}{
		{alice, 1, 1, 39900},
		{bob, 2, 1, 2 * 34900},
		{carol, 3, 2, 3 * 2 * 32900},
	} {
		o, err := e.buy(t, tt.u, flashsale.PurchaseRequest{SaleID: s.ID, Rooms: tt.rooms, Nights: tt.nights})
		if err != nil {
			t.Fatal(err)
		}
		if o.Amount != tt.want {
			t.Errorf("%d rooms for %d nights: amount %d, want %d", tt.rooms, tt.nights, o.Amount, tt.want)
		}
	}
	e.nights(t, s.ID)
}
