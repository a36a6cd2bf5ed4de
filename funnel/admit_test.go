package funnel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// stuckEngine holds every Reserve of the sales in stuck until release is
// closed, as a Redis shard under a flood would.
type stuckEngine struct {
	*inmem.Engine
	mu      sync.Mutex
	stuck   map[string]bool
	release chan struct{}
	waiting atomic.Int64
}

func (e *stuckEngine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	e.mu.Lock()
	stuck := e.stuck[r.SaleID]
	e.mu.Unlock()
	if stuck {
		e.waiting.Add(1)
		select {
		case <-e.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return e.Engine.Reserve(ctx, r)
}

// TestAdmission: a flood on one sale is shed at its own bound and leaves
// room for another sale; the instance's bound sheds everything beyond it;
// a sold-out answer is never shed; the purchases held meanwhile all end as
// orders, and what was shed took nothing.
func TestAdmission(t *testing.T) {
	ctx := context.Background()
	var eng *stuckEngine
	e := mustOpenAudit(t, func(in *inmem.Engine) flashsale.StockEngine {
		eng = &stuckEngine{Engine: in, stuck: map[string]bool{}, release: make(chan struct{})}
		return flashsale.EngineOf(eng)
	}, func(cfg *funnel.Config, _ *inmem.Writer) { cfg.MaxInFlight, cfg.MaxInFlightPerSale = 3, 2 })
	noToken := func(s *flashsale.Sale) { s.PurchaseToken = false }
	hot, other, third := e.sale(t, noToken, 10), e.sale(t, noToken, 10), e.sale(t, noToken, 10)
	gone := e.sale(t, noToken, 1)
	e.mustBuy(t, flashsale.User{ID: "first"}, flashsale.PurchaseRequest{SaleID: gone.ID})
	eng.mu.Lock()
	eng.stuck[hot.ID], eng.stuck[other.ID] = true, true
	eng.mu.Unlock()
	var once sync.Once
	unstick := func() { once.Do(func() { close(eng.release) }) }
	t.Cleanup(unstick) // a failed check must not leave purchases stuck

	var wg sync.WaitGroup
	held := func(user string, saleID string) {
		wg.Go(func() {
			if _, err := e.svc.Purchase(ctx, flashsale.User{ID: user}, flashsale.PurchaseRequest{SaleID: saleID, IdempotencyKey: "k-" + user}); err != nil {
				t.Errorf("%s: held purchase: %v", user, err)
			}
		})
	}
	buy := func(user, saleID string) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a purchase let through would wait forever
		defer cancel()
		_, err := e.svc.Purchase(ctx, flashsale.User{ID: user}, flashsale.PurchaseRequest{SaleID: saleID})
		return err
	}
	waitUntil := func(n int64) {
		t.Helper()
		for eng.waiting.Load() < n {
			if t.Failed() {
				t.FailNow()
			}
			time.Sleep(time.Millisecond)
		}
	}
	held("hot-1", hot.ID)
	held("hot-2", hot.ID)
	waitUntil(2)
	if err := buy("hot-3", hot.ID); !errors.Is(err, flashsale.ErrOverloaded) || flashsale.ErrorCode(err) != flashsale.EUnavailable {
		t.Fatalf("third purchase of the hot sale: %v, want overloaded (503)", err)
	}
	// The hot sale is at its bound; another sale still gets in.
	held("other-1", other.ID)
	waitUntil(3)
	// The instance is at its bound: every sale is shed now ...
	if err := buy("third-1", third.ID); !errors.Is(err, flashsale.ErrOverloaded) {
		t.Fatalf("purchase with the instance full: %v, want overloaded", err)
	}
	// ... but a sold-out answer costs nothing and is never shed.
	if err := buy("late", gone.ID); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("purchase of a sold-out sale with the instance full: %v, want sold out", err)
	}
	unstick()
	wg.Wait()
	// Shed purchases took nothing; the held ones are orders; all bounds
	// are free again.
	for i := range 3 {
		if err := buy(fmt.Sprintf("after-%d", i), third.ID); err != nil {
			t.Fatalf("purchase after the flood: %v", err)
		}
	}
	for _, s := range []*flashsale.Sale{hot, other, third} {
		e.nights(t, s.ID)
	}
	if n := e.nights(t, hot.ID)[0]; n.Held != 2 {
		t.Fatalf("hot sale: %+v, want the 2 held purchases and nothing of the shed one", n)
	}
}

// TestPurchaseLimits: each purchase limit refuses past its burst with a
// Retry-After from the limiter and takes nothing; a refusal for one key
// spends nothing of the next (the sale's allowance survives a scalper);
// a sold-out answer is never limited.
func TestPurchaseLimits(t *testing.T) {
	ctx := context.Background()
	limiter := inmem.NewLimiter()
	t.Cleanup(func() { limiter.Close() })
	e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		cfg.Limiter = limiter
		cfg.Limits = funnel.Limits{
			PerIP:   flashsale.PerSecond(1, 3),
			PerUser: flashsale.PerSecond(1, 2),
			PerSale: flashsale.Rate{N: 1, Per: time.Minute, Burst: 4},
		}
	})
	s := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken, s.PerUserLimit = false, 10 }, 20)
	buy := func(user, ip string) error {
		_, err := e.svc.Purchase(ctx, flashsale.User{ID: user}, flashsale.PurchaseRequest{SaleID: s.ID, ClientIP: ip})
		return err
	}
	limited := func(err error, what string) {
		t.Helper()
		rl, ok := errors.AsType[*flashsale.RateLimitedError](err)
		if !ok || !errors.Is(err, flashsale.ErrRateLimited) || rl.Wait <= 0 {
			t.Fatalf("%s: %v, want rate limited with a Retry-After", what, err)
		}
	}
	// Per user: alice's third is refused, from any address.
	for i := range 2 {
		if err := buy("alice", fmt.Sprintf("198.51.100.%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	limited(buy("alice", "198.51.100.9"), "alice's third purchase")
	// Per address: three users behind one address, the fourth is refused.
	for _, u := range []string{"bob", "carol", "dave"} {
		if err := buy(u, "203.0.113.1"); err != nil && !errors.Is(err, flashsale.ErrRateLimited) {
			t.Fatal(err)
		}
	}
	limited(buy("erin", "203.0.113.1"), "the fourth user from one address")
	// Per sale: 4 went through (alice 2, bob, carol); dave's was refused by the
	// sale's allowance, and a new guest from a new address is refused too.
	limited(buy("frank", "192.0.2.1"), "a purchase past the sale's allowance")
	if n := e.nights(t, s.ID)[0]; n.Held != 4 {
		t.Fatalf("held %d, want the 4 admitted purchases and nothing of the refused ones", n.Held)
	}
	// A sold-out sale answers sold out however often it is asked.
	gone := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 0)
	for range 10 {
		if _, err := e.svc.Purchase(ctx, flashsale.User{ID: "alice"}, flashsale.PurchaseRequest{SaleID: gone.ID, ClientIP: "203.0.113.1"}); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatalf("purchase of a sold-out sale: %v, want sold out (never limited)", err)
		}
	}
}
