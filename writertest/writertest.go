// Package writertest is the conformance suite every flashsale.OrderWriter
// passes: the embedded shape's group-commit writer (inmem) and the
// distributed shape's confirmed publisher (amqp), each with the path its
// orders take into a store. A purchase is answered on what Write returns,
// so the suite checks what each answer promises about the order:
//
//   - nil: the order lands, once, however often it was written;
//   - ErrIndeterminate: nothing is promised (the caller keeps the units);
//   - any other error wraps ErrUnavailable and the order never lands, so the
//     caller may give its units back. A Write whose context had already
//     ended is such a failure.
package writertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// Harness is one writer under test and the store its orders land in.
type Harness struct {
	Writer flashsale.OrderWriter
	// Store is where a written order ends up: the writer's own store, or
	// the one a queue's consumer writes into.
	Store flashsale.Store
}

// OpenFunc opens a writer over a fresh, migrated, empty store that no
// other test shares, and closes both with tb.Cleanup.
type OpenFunc = func(tb testing.TB) Harness

// Run runs the suite; every subtest opens its own harness.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Lands", func(t *testing.T) { testLands(t, open) })
	t.Run("Twice", func(t *testing.T) { testTwice(t, open) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, open) })
	t.Run("Storm", func(t *testing.T) { testStorm(t, open) })
}

// landWait bounds how long a written order may take to land (a queue's
// consumer batches and commits).
const landWait = 30 * time.Second

// setup opens a harness and creates a sale of stock rooms a night for two
// nights.
func setup(t *testing.T, open OpenFunc, stock int) (Harness, *flashsale.Sale) {
	t.Helper()
	h := open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	sale := fixture.Sale(fixture.ID("wt-"+fmt.Sprint(now.UnixNano())), fixture.Stock(stock, stock), fixture.Price(69900, 99900),
		fixture.Window(now.Add(-time.Hour), now.Add(24*time.Hour)), fixture.Hold(600), fixture.Created(now.Add(-2*time.Hour)))
	if err := h.Store.CreateSale(t.Context(), sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return h, sale
}

// reservation is user i's purchase of one room for the sale's first night.
func reservation(sale *flashsale.Sale, i int) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: fmt.Sprintf("%s-o%06d", sale.ID, i), SaleID: sale.ID,
		UserID: fmt.Sprintf("u%06d", i), IdempotencyKey: fmt.Sprintf("k%06d", i),
		FirstNight: 0, Nights: 1, Rooms: 1, Amount: sale.Price,
		HoldExpiresAt: time.Now().Add(10 * time.Minute).UTC().Truncate(time.Millisecond), Active: true,
	}
}

// accepted reports whether a Write's answer says the order path has it.
func accepted(t *testing.T, status flashsale.OrderStatus, err error) bool {
	t.Helper()
	switch {
	case err == nil && (status == flashsale.OrderHeld || status == flashsale.OrderPending):
		return true
	case err == nil:
		t.Errorf("Write = %q, nil: an accepted order is held or pending", status)
	case errors.Is(err, flashsale.ErrIndeterminate):
	case !errors.Is(err, flashsale.ErrUnavailable):
		t.Errorf("Write error %v does not wrap ErrUnavailable: the caller cannot tell whether to give the units back", err)
	}
	return false
}

// waitLanded waits for order id to be in the store, held.
func waitLanded(t *testing.T, s flashsale.Store, id string) {
	t.Helper()
	deadline := time.Now().Add(landWait)
	for {
		o, err := s.Order(t.Context(), id)
		if err == nil {
			if o.Status != flashsale.OrderHeld {
				t.Fatalf("order %s landed %s, want held", id, o.Status)
			}
			return
		}
		if !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Order(%s): %v", id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s accepted but not in the store after %v", id, landWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// held is the rooms the store counts held on the sale's first night.
func held(t *testing.T, s flashsale.Store, saleID string) int {
	t.Helper()
	ns, err := s.NightStocks(t.Context(), saleID)
	if err != nil || len(ns) == 0 {
		t.Fatalf("NightStocks: %v, %v", ns, err)
	}
	return ns[0].Held
}

func testLands(t *testing.T, open OpenFunc) {
	h, sale := setup(t, open, 5)
	r := reservation(sale, 1)
	status, err := h.Writer.Write(t.Context(), r)
	if !accepted(t, status, err) {
		t.Fatalf("Write = %q, %v; want it accepted", status, err)
	}
	waitLanded(t, h.Store, r.OrderID)
	if got := held(t, h.Store, sale.ID); got != 1 {
		t.Errorf("held = %d, want 1", got)
	}
}

// testTwice writes one reservation twice, as a relay republishing an
// unconfirmed order does: both are accepted, and it is one order.
func testTwice(t *testing.T, open OpenFunc) {
	h, sale := setup(t, open, 5)
	r := reservation(sale, 1)
	for i := range 2 {
		status, err := h.Writer.Write(t.Context(), r)
		if !accepted(t, status, err) {
			t.Fatalf("Write %d = %q, %v; want it accepted", i+1, status, err)
		}
	}
	waitLanded(t, h.Store, r.OrderID)
	// A second copy would land after the first; the next order lands
	// after both.
	next := reservation(sale, 2)
	if status, err := h.Writer.Write(t.Context(), next); !accepted(t, status, err) {
		t.Fatalf("Write = %q, %v; want it accepted", status, err)
	}
	waitLanded(t, h.Store, next.OrderID)
	if got := held(t, h.Store, sale.ID); got != 2 {
		t.Errorf("held = %d after one order written twice and another once, want 2", got)
	}
}

// testCanceled: a Write whose context has already ended is refused for
// certain, and the order never lands, so the caller may give the units
// back.
func testCanceled(t *testing.T, open OpenFunc) {
	h, sale := setup(t, open, 5)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := reservation(sale, 1)
	status, err := h.Writer.Write(ctx, r)
	if err == nil || !errors.Is(err, flashsale.ErrUnavailable) || errors.Is(err, flashsale.ErrIndeterminate) {
		t.Fatalf("Write with its context ended = %q, %v; want a certain ErrUnavailable", status, err)
	}
	next := reservation(sale, 2)
	if status, err := h.Writer.Write(t.Context(), next); !accepted(t, status, err) {
		t.Fatalf("Write = %q, %v; want it accepted", status, err)
	}
	waitLanded(t, h.Store, next.OrderID)
	if _, err := h.Store.Order(t.Context(), r.OrderID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("the refused order: Order = %v, want ErrNotFound", err)
	}
	if got := held(t, h.Store, sale.ID); got != 1 {
		t.Errorf("held = %d, want 1", got)
	}
}

// testStorm writes from many goroutines at once: every accepted order
// lands once, and the store's count is exactly the accepted ones.
func testStorm(t *testing.T, open OpenFunc) {
	const writers, each = 50, 20
	h, sale := setup(t, open, writers*each)
	var (
		mu sync.Mutex
		ok []string
		wg sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				r := reservation(sale, w*each+i)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				status, err := h.Writer.Write(ctx, r)
				cancel()
				if accepted(t, status, err) {
					mu.Lock()
					ok = append(ok, r.OrderID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(ok) < writers*each/2 {
		t.Fatalf("%d of %d writes accepted: the storm proves little", len(ok), writers*each)
	}
	for _, id := range ok {
		waitLanded(t, h.Store, id)
	}
	if got := held(t, h.Store, sale.ID); got != len(ok) {
		t.Errorf("held = %d, want the %d accepted", got, len(ok))
	}
}
