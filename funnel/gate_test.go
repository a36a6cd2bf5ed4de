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

// slowReserve is an engine whose reserves take as long as a round trip to
// a busy Redis, counted.
type slowReserve struct {
	flashsale.StockEngine
	reserves, lookups atomic.Int64
}

func (e *slowReserve) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	e.reserves.Add(1)
	time.Sleep(2 * time.Millisecond)
	return e.StockEngine.Reserve(ctx, r)
}

func (e *slowReserve) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	e.lookups.Add(1)
	return e.StockEngine.Lookup(ctx, saleID, userID, key)
}

// TestBurstHearsSoldOut: a burst far beyond a sale's rooms sends the
// engine its rooms and about one gate's worth of reserves more; the rest
// hear the sold-out flag while they wait (gate.go). Before the gate, a
// 100-room sale's burst sent Redis 1 768 reserves (issue 26). A keyed
// purchase that reaches the engine costs one call, not a lookup as well,
// and a keyed retry still finds its order after the sell-out.
func TestBurstHearsSoldOut(t *testing.T) {
	const rooms, guests = 10, 600
	var slow *slowReserve
	e := mustOpenAudit(t, func(en *inmem.Engine) flashsale.StockEngine {
		slow = &slowReserve{StockEngine: en.Roles()}
		return flashsale.EngineOf(slow)
	}, func(c *funnel.Config, _ *inmem.Writer) { c.MaxInFlightPerSale = guests; c.MaxInFlight = guests })
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false; s.PerUserLimit = 1 }, rooms)
	ctx := context.Background()

	start := make(chan struct{})
	var wg sync.WaitGroup
	var accepted atomic.Int64
	orders := make([]string, guests)
	for i := range guests {
		wg.Go(func() {
			<-start
			u := flashsale.User{ID: fmt.Sprintf("guest-%04d", i)}
			o, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k-1"})
			switch {
			case err == nil:
				accepted.Add(1)
				orders[i] = o.ID
			case !errors.Is(err, flashsale.ErrSoldOut):
				t.Errorf("guest %d: %v, want an order or sold out", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := accepted.Load(); got != rooms {
		t.Fatalf("%d accepted, want %d", got, rooms)
	}
	reserves, lookups := slow.reserves.Load(), slow.lookups.Load()
	if limit := int64(rooms + 2*funnel.EngineInFlightPerSale); reserves > limit {
		t.Errorf("%d guests sent the engine %d reserves, want at most %d (the rooms and two gates' worth)", guests, reserves, limit)
	}
	// Every refused guest looks its key up once (it may name an earlier
	// attempt's order); no accepted one does.
	if refused := int64(guests - rooms); lookups > refused {
		t.Errorf("%d lookups, want at most one per refused guest (%d)", lookups, refused)
	}
	t.Logf("%d guests, %d rooms: %d reserves, %d lookups", guests, rooms, reserves, lookups)

	for i, id := range orders {
		if id == "" {
			continue
		}
		u := flashsale.User{ID: fmt.Sprintf("guest-%04d", i)}
		again, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "k-1"})
		if err != nil || again.ID != id {
			t.Fatalf("guest %d's keyed retry after the sell-out: %v, %+v; want order %s", i, err, again, id)
		}
	}
}

// barrierWriter holds each write until want of them are in flight at once,
// or gives up after a while (timedOut).
type barrierWriter struct {
	flashsale.OrderWriter
	want     int
	mu       sync.Mutex
	n        int
	all      chan struct{}
	timedOut atomic.Bool
}

func (w *barrierWriter) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	w.mu.Lock()
	if w.n++; w.n == w.want {
		close(w.all)
	}
	w.mu.Unlock()
	select {
	case <-w.all:
	case <-time.After(5 * time.Second):
		w.timedOut.Store(true)
	}
	return w.OrderWriter.Write(ctx, r)
}

// TestGateIsTheReservesAlone: the gate bounds reserves in flight, not the
// order's write after it: a group commit (or a confirmed publish) takes
// as many of a sale's orders at once as arrive. Holding the slot through
// the write capped the group commit's batches at the gate's size, and the
// embedded storm (cmd/flashsale TestStorm) shed 524 purchases as
// overloaded.
func TestGateIsTheReservesAlone(t *testing.T) {
	const buyers = 2 * funnel.EngineInFlightPerSale
	var bw *barrierWriter
	e := mustOpenAudit(t, nil, func(c *funnel.Config, w *inmem.Writer) {
		bw = &barrierWriter{OrderWriter: w, want: buyers, all: make(chan struct{})}
		c.Writer = bw
	})
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false; s.PerUserLimit = 1 }, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			u := flashsale.User{ID: fmt.Sprintf("guest-%04d", i)}
			if _, err := e.svc.Purchase(context.Background(), u, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
				t.Errorf("guest %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if bw.timedOut.Load() {
		t.Fatalf("%d purchases of one sale were never in the order's write at once (gate of %d)", buyers, funnel.EngineInFlightPerSale)
	}
}
