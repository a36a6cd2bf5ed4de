package funnel_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
)

// TestForgetOver: a sale over for good (ended, its last hold run out and
// the late payments' window passed) leaves the engine, and with it every
// record of its orders, while the database keeps them: each reads back as
// it was, and a late payment of an expired hold is refused as too late,
// as after a restart. Inside the window the engine keeps it and such a
// payment still takes the room back; a live sale is never touched.
func TestForgetOver(t *testing.T) {
	ctx := context.Background()
	const window = time.Hour
	e := mustOpenWith(t, filepath.Join(t.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) { cfg.LatePayments = window })
	over := e.sale(t, nil, 5)
	buy := func(saleID, user string) *flashsale.Order {
		t.Helper()
		o, err := e.buy(t, flashsale.User{ID: user}, flashsale.PurchaseRequest{SaleID: saleID})
		if err != nil {
			t.Fatalf("%s buys: %v", user, err)
		}
		return o
	}
	paid := buy(over.ID, "ann")
	if _, err := e.svc.MarkPaid(ctx, paid.ID, "charge-ann"); err != nil {
		t.Fatal(err)
	}
	early, late := buy(over.ID, "bob"), buy(over.ID, "cat")
	// The sale ends; the holds run out and are reaped.
	e.clock.Advance(over.EndsAt.Sub(e.clock.Now()) + over.HoldDuration() + time.Second)
	if n := e.svc.Reap(ctx); n != 2 {
		t.Fatalf("reaped %d holds, want bob's and cat's", n)
	}
	live := e.sale(t, nil, 3) // opens now, ends in an hour
	liveOrder := buy(live.ID, "dan")

	// Inside the window: kept, and a late payment takes its room back.
	e.svc.ForgetOver(ctx)
	if _, err := e.engine.Available(ctx, over.ID); err != nil {
		t.Fatalf("inside the late payments' window the engine lost the sale: %v", err)
	}
	if o, err := e.svc.MarkPaid(ctx, early.ID, "charge-bob"); err != nil || o.Status != flashsale.OrderPaid {
		t.Fatalf("a late payment inside the window: %+v, %v; want paid", o, err)
	}

	// Past it: forgotten by the engine, kept by the database.
	e.clock.Advance(window)
	e.svc.ForgetOver(ctx)
	if _, err := e.engine.Available(ctx, over.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("a sale over for good: engine answers %v, want ErrNotLoaded (forgotten)", err)
	}
	if _, err := e.engine.Reservation(ctx, paid.ID); err == nil {
		t.Fatal("the engine still has a record of a forgotten sale's order")
	}
	if _, err := e.svc.MarkPaid(ctx, late.ID, "charge-cat"); !errors.Is(err, flashsale.ErrHoldExpired) {
		t.Fatalf("a late payment past the window: %v, want hold_expired (refund)", err)
	}
	for id, want := range map[string]flashsale.OrderStatus{paid.ID: flashsale.OrderPaid, early.ID: flashsale.OrderPaid, late.ID: flashsale.OrderExpired} {
		if o, err := e.svc.OrderByID(ctx, id); err != nil || o.Status != want {
			t.Fatalf("order %s after the sale was forgotten: %+v, %v; want %s", id, o, err, want)
		}
	}
	if ns, err := e.store.NightStocks(ctx, over.ID); err != nil || ns[0].Sold != 2 || ns[0].Held != 0 {
		t.Fatalf("the forgotten sale's nights in the database: %+v, %v; want 2 sold", ns, err)
	}
	// The live sale is untouched.
	if a, err := e.engine.Available(ctx, live.ID); err != nil || a[0] != 2 {
		t.Fatalf("the live sale after the look: %v, %v; want 2 left", a, err)
	}
	if r, err := e.engine.Reservation(ctx, liveOrder.ID); err != nil || !r.Active {
		t.Fatalf("the live sale's reservation after the look: %+v, %v", r, err)
	}
}
