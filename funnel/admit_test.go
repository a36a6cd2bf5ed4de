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
		return eng
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
