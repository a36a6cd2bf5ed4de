package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

// testPlaceOrdersModel checks PlaceOrders against a sequential model over
// many batches of random reservations (redeliveries, key clashes, limits,
// stays past the last night, unknown sales), so every path through the
// batch, including refusals in the middle of a batch, gives exactly the
// result one-at-a-time processing would.
//
// About 800 reservations in 40 batches: enough to reach every path many
// times, and about a second for SQLite under -race.
func testPlaceOrdersModel(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	sale := mustCreateSale(t, s, newSale("m", 2, 9, 6, 4))
	type userKey struct{ sale, user, key string }
	var (
		ids   = map[string]bool{}
		keys  = map[userKey]bool{}
		users = map[string]int{}
		held  = make([]int, len(sale.Nights))
	)
	model := func(r flashsale.Reservation) error {
		if r.SaleID != sale.ID {
			// Refused before anything is written: no row, no key bound.
			return flashsale.ErrNotFound
		}
		switch {
		case ids[r.OrderID]:
			return flashsale.ErrDuplicate
		case r.IdempotencyKey != "" && keys[userKey{r.SaleID, r.UserID, r.IdempotencyKey}]:
			ids[r.OrderID] = true
			return flashsale.ErrKeyConflict
		}
		ids[r.OrderID] = true
		if r.IdempotencyKey != "" {
			keys[userKey{r.SaleID, r.UserID, r.IdempotencyKey}] = true
		}
		if users[r.UserID]+r.Rooms > sale.PerUserLimit {
			return flashsale.ErrLimitExceeded
		}
		if r.FirstNight+r.Nights > len(held) {
			return flashsale.ErrSoldOut
		}
		for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
			if sale.Nights[i].Stock-held[i] < r.Rooms {
				return flashsale.ErrSoldOut
			}
		}
		for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
			held[i] += r.Rooms
		}
		users[r.UserID] += r.Rooms
		return nil
	}

	rng := rand.New(rand.NewPCG(7, 11))
	for batch := range 40 {
		rs := make([]flashsale.Reservation, 1+rng.IntN(40))
		for i := range rs {
			r := flashsale.Reservation{
				OrderID: fmt.Sprintf("o%d", rng.IntN(400)), SaleID: sale.ID,
				UserID: fmt.Sprintf("u%d", rng.IntN(30)), FirstNight: rng.IntN(3), Nights: 1 + rng.IntN(2),
				Rooms: 1 + rng.IntN(2), Amount: 100, HoldExpiresAt: now.Add(time.Minute),
			}
			if rng.IntN(3) == 0 {
				r.IdempotencyKey = fmt.Sprintf("k%d", rng.IntN(3))
			}
			if rng.IntN(25) == 0 {
				r.SaleID = "unknown"
			}
			rs[i] = r
		}
		got, err := s.PlaceOrders(ctx, rs)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		if len(got) != len(rs) {
			t.Fatalf("batch %d: PlaceOrders returned %d results for %d reservations", batch, len(got), len(rs))
		}
		for i, r := range rs {
			if want := model(r); got[i] != want {
				t.Fatalf("batch %d, reservation %d (%+v): got %v, want %v", batch, i, r, got[i], want)
			}
		}
	}
	nights, err := s.NightStocks(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nights {
		if n.Held != held[i] {
			t.Errorf("night %d held %d, model %d", i, n.Held, held[i])
		}
	}
	if got := len(ids); got < 200 {
		t.Errorf("only %d distinct orders: the model test exercised too little", got)
	}
}

// testLifecycle walks one sale through a mixed batch and the payment
// transitions that follow it: a redelivery, a key clash, a sold-out night,
// a limit, an unknown sale, a payment, a stale second payment, and a late
// payment after a cancel that retakes the rooms.
func testLifecycle(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	sale := mustCreateSale(t, s, newSale("s1", 2, 3, 1))
	got, err := s.Sale(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sale, got, msTime); diff != "" {
		t.Errorf("Sale mismatch (-want +got):\n%s", diff)
	}
	placeWant(t, s,
		[]error{nil, flashsale.ErrDuplicate, flashsale.ErrKeyConflict, flashsale.ErrSoldOut, flashsale.ErrLimitExceeded, nil, flashsale.ErrNotFound},
		res("o1", "s1", "u1", "k1", 0, 2, 1),
		res("o1", "s1", "u1", "k1", 0, 2, 1),
		res("o2", "s1", "u1", "k1", 0, 1, 1),
		res("o3", "s1", "u2", "", 0, 2, 1),
		res("o4", "s1", "u1", "", 0, 1, 2),
		res("o5", "s1", "u3", "", 0, 1, 2),
		res("o6", "nope", "u3", "", 0, 1, 1),
	)
	checkNights(t, s, sale, hs{held: 3}, hs{held: 1})
	if o2 := mustOrder(t, s, "o2"); o2.Status != flashsale.OrderFailed || o2.IdempotencyKey != "" {
		t.Errorf("o2 = %+v, want failed without key", o2)
	}
	// The reservation for an unknown sale wrote nothing.
	if _, err := s.Order(ctx, "o6"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("Order(o6) of an unknown sale = %v, want ErrNotFound", err)
	}
	o1, err := s.OrderByKey(ctx, "s1", "u1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	hold := res("o1", "s1", "u1", "k1", 0, 2, 1).HoldExpiresAt
	if o1.ID != "o1" || o1.CheckIn != "2026-12-24" || !o1.HoldExpiresAt.Truncate(time.Millisecond).Equal(hold.Truncate(time.Millisecond)) {
		t.Errorf("OrderByKey = %+v", o1)
	}

	// Pay o1, cancel o5, then pay o5 late: its rooms are still free.
	mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
	if _, err := s.Transition(ctx, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1", now); !errors.Is(err, flashsale.ErrStale) {
		t.Errorf("second pay: %v, want ErrStale", err)
	}
	if _, err := s.Transition(ctx, "zz", flashsale.OrderHeld, flashsale.OrderPaid, "", now); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("unknown: %v, want ErrNotFound", err)
	}
	mustTransition(t, s, "o5", flashsale.OrderHeld, flashsale.OrderCancelled, "")
	if o5 := mustTransition(t, s, "o5", flashsale.OrderCancelled, flashsale.OrderPaid, "pay-5"); o5.Status != flashsale.OrderPaid || o5.PaymentRef != "pay-5" {
		t.Errorf("o5 = %+v", o5)
	}
	checkNights(t, s, sale, hs{sold: 3}, hs{sold: 1})
	snap, err := s.Snapshot(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(snap.Reservations), 5; got != want {
		t.Errorf("snapshot reservations = %d, want %d", got, want)
	}
}
