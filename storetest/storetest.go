// Package storetest is the conformance suite every flashsale.Store must
// pass. Each engine package (sqlite, mysql, postgres) calls Run from its own
// tests with a function that opens a fresh, migrated, empty store, so the
// promises in the Store doc comments are checked once, the same way, for
// every engine.
//
// The tests assert on the counters (NightStocks, and the per-user limit as
// PlaceOrders sees it), not only on returned errors: a store that answers
// correctly while its books drift must fail.
package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// OpenFunc opens a fresh, migrated, empty store that no other test shares
// and closes it with tb.Cleanup.
type OpenFunc = func(tb testing.TB) flashsale.Store

// Run runs the whole suite against the stores open returns. Every subtest
// opens its own store, so subtests never see each other's rows.
//
// PlaceOrders, Transition and ExpireHolds must not return a transaction
// error under contention (deadlocks, serialization failures): the storm and
// concurrency subtests treat any such error as a failure, because the
// group-commit writer would fail a whole batch of accepted purchases and a
// reaper would leave holds unreleased. Retry them inside the store.
//
// Beyond the bare interface, the suite pins down what the Store comments
// imply: times round-trip at millisecond precision in any zone; Transition
// and ExpireHolds set UpdatedAt to their now argument; Transition sets
// PaymentRef when moving to paid; an order that failed a guard keeps its
// idempotency key (OrderByKey finds it); Snapshot lists every order of the
// sale, failed ones inactive; a reservation for an unknown sale is
// ErrNotFound and one with no rooms, no nights or a negative first night
// is ErrInvalid, both refused before anything is written (no row, no key
// bound, no ID taken), so a redelivery gets the same answer again; an order
// PlaceOrders fails carries the refusal's error code as its FailureReason;
// FailOrder obeys the same refusals, writes a failed order with the
// stay's first night as its check-in and the hold expiry it was given, and
// keeps a reason of up to 200 characters.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Sale", func(t *testing.T) { testSale(t, open) })
	t.Run("Sales", func(t *testing.T) { testSales(t, open) })
	t.Run("Revisions", func(t *testing.T) { testRevisions(t, open) })
	t.Run("NightStocks", func(t *testing.T) { testNightStocks(t, open) })
	t.Run("NightStocksOf", func(t *testing.T) { testNightStocksOf(t, open) })
	t.Run("PlaceOrders", func(t *testing.T) { testPlaceOrders(t, open) })
	t.Run("Order", func(t *testing.T) { testOrder(t, open) })
	t.Run("OrderByKey", func(t *testing.T) { testOrderByKey(t, open) })
	t.Run("Transition", func(t *testing.T) { testTransition(t, open) })
	t.Run("ExpireHolds", func(t *testing.T) { testExpireHolds(t, open) })
	t.Run("Snapshot", func(t *testing.T) { testSnapshot(t, open) })
	t.Run("FailOrder", func(t *testing.T) { testFailOrder(t, open) })
	t.Run("PlaceOrdersModel", func(t *testing.T) { testPlaceOrdersModel(t, open) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open) })
	t.Run("Storm", func(t *testing.T) { testStorm(t, open) })
	t.Run("UpdateSale", func(t *testing.T) { testUpdateSale(t, open) })
	t.Run("StayRules", func(t *testing.T) { testStayRules(t, open) })
	t.Run("Kinds", func(t *testing.T) { testKinds(t, open) })
	t.Run("AdjustStock", func(t *testing.T) { testAdjustStock(t, open) })
	t.Run("AdjustStorm", func(t *testing.T) { testAdjustStorm(t, open) })
	t.Run("ListSales", func(t *testing.T) { testListSales(t, open) })
	t.Run("SaleOrders", func(t *testing.T) { testSaleOrders(t, open) })
	t.Run("SaleChanges", func(t *testing.T) { testSaleChanges(t, open) })
	t.Run("Notices", func(t *testing.T) { testNotices(t, open) })
	t.Run("DeleteSale", func(t *testing.T) { testDeleteSale(t, open) })
	t.Run("PruneOutbox", func(t *testing.T) { testPruneOutbox(t, open) })
	t.Run("QueueRecords", func(t *testing.T) { testQueueRecords(t, open) })
}

// now is the suite's clock. It is deliberately not time.Now: stores must
// use the times they are given.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// cst is a non-UTC zone for inputs, so a store that keeps or drops zones
// wrongly shows up. Stores keep unix milliseconds; comparisons normalise.
var cst = time.FixedZone("CST", 8*60*60)

// msTime compares times at millisecond precision, whatever their zone.
var msTime = cmp.Comparer(func(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
})

// ignoreStamps ignores the order timestamps the store sets itself.
var ignoreStamps = cmpopts.IgnoreFields(flashsale.Order{}, "CreatedAt", "UpdatedAt")

// statuses lists every order status, for the transition tables.
var statuses = []flashsale.OrderStatus{
	flashsale.OrderPending, flashsale.OrderHeld, flashsale.OrderPaid,
	flashsale.OrderExpired, flashsale.OrderCancelled, flashsale.OrderFailed,
}

// legal reports whether Transition accepts the pair.
func legal(from, to flashsale.OrderStatus) bool {
	switch from {
	case flashsale.OrderHeld:
		return to == flashsale.OrderPaid || to == flashsale.OrderExpired || to == flashsale.OrderCancelled
	case flashsale.OrderExpired, flashsale.OrderCancelled:
		return to == flashsale.OrderPaid
	}
	return false
}

// newSale returns a valid sale with one night per stock, starting on
// 2026-12-24, each sale with its own title. Times carry sub-millisecond
// parts and a non-UTC zone.
func newSale(id string, limit int, stocks ...int) *flashsale.Sale {
	s := fixture.Sale(fixture.ID(id), fixture.StockFrom(time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC), stocks...),
		fixture.Price(69900, 99900), fixture.Zone("Asia/Shanghai"), fixture.Limit(limit),
		fixture.Window(now.Add(-time.Hour+123456789).In(cst), now.Add(24*time.Hour).In(cst)),
		fixture.Created(now.Add(-2*time.Hour+987654)))
	s.Title += " " + id
	return s
}

// res returns a reservation of rooms rooms for nights nights from night
// index first, with a hold ending 30 s after now.
func res(id, saleID, userID, key string, first, nights, rooms int) flashsale.Reservation {
	return flashsale.Reservation{
		OrderID:        id,
		SaleID:         saleID,
		UserID:         userID,
		IdempotencyKey: key,
		FirstNight:     first,
		Nights:         nights,
		Rooms:          rooms,
		Amount:         int64(69900 * nights * rooms),
		HoldExpiresAt:  now.Add(30*time.Second + 456789),
		Active:         true,
	}
}

// mustCreateSale creates a sale or fails the test.
func mustCreateSale(tb testing.TB, s flashsale.Store, sale *flashsale.Sale) *flashsale.Sale {
	tb.Helper()
	if err := s.CreateSale(tb.Context(), sale); err != nil {
		tb.Fatalf("CreateSale(%s): %v", sale.ID, err)
	}
	return sale
}

// place runs PlaceOrders and fails the test on a transaction error or a
// result of the wrong length.
func place(tb testing.TB, s flashsale.Store, rs ...flashsale.Reservation) []error {
	tb.Helper()
	errs, err := s.PlaceOrders(tb.Context(), rs)
	if err != nil {
		tb.Fatalf("PlaceOrders: %v", err)
	}
	if got, want := len(errs), len(rs); got != want {
		tb.Fatalf("PlaceOrders returned %d results for %d reservations", got, want)
	}
	return errs
}

// placeWant places rs and checks each result against want (nil means success).
func placeWant(tb testing.TB, s flashsale.Store, want []error, rs ...flashsale.Reservation) {
	tb.Helper()
	errs := place(tb, s, rs...)
	for i, err := range errs {
		if !sameErr(err, want[i]) {
			tb.Errorf("PlaceOrders[%d] (order %s) = %v, want %v", i, rs[i].OrderID, err, want[i])
		}
	}
}

// sameErr reports whether got is want (both nil, or errors.Is).
func sameErr(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

// together calls each of fns with every i in [0, n), each call in a
// goroutine of its own (for each i, fns in order), all released at once,
// and waits for them: the racing callers of a concurrency test.
func together(n int, fns ...func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		for _, fn := range fns {
			wg.Go(func() {
				<-start
				fn(i)
			})
		}
	}
	close(start)
	wg.Wait()
}

// wins counts the racing calls named name that succeeded, errs being
// their results; an error that is none of losers (what a call that lost
// the race returns) fails the test.
func wins(t *testing.T, name string, errs []error, losers ...error) int {
	t.Helper()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !slices.ContainsFunc(losers, func(l error) bool { return errors.Is(err, l) }):
			t.Errorf("%s #%d = %v, want nil or one of %v", name, i, err, losers)
		}
	}
	return won
}

// hs is one night's expected held and sold counters.
type hs struct{ held, sold int }

// checkNights compares a sale's night counters with want, one per night.
func checkNights(tb testing.TB, s flashsale.Store, sale *flashsale.Sale, want ...hs) {
	tb.Helper()
	got, err := s.NightStocks(tb.Context(), sale.ID)
	if err != nil {
		tb.Fatalf("NightStocks(%s): %v", sale.ID, err)
	}
	if diff := cmp.Diff(nightStocks(sale, want...), got); diff != "" {
		tb.Errorf("NightStocks(%s) mismatch (-want +got):\n%s", sale.ID, diff)
	}
}

// nightStocks returns the NightStocks of a sale whose nights have the
// counters want, one per night.
func nightStocks(sale *flashsale.Sale, want ...hs) []flashsale.NightStock {
	var ns []flashsale.NightStock
	for i, n := range sale.Nights {
		w := want[i]
		ns = append(ns, flashsale.NightStock{
			Date: n.Date, Stock: n.Stock, Available: n.Stock - w.held - w.sold, Held: w.held, Sold: w.sold,
		})
	}
	return ns
}

// mustOrder returns an order or fails the test.
func mustOrder(tb testing.TB, s flashsale.Store, id string) *flashsale.Order {
	tb.Helper()
	o, err := s.Order(tb.Context(), id)
	if err != nil {
		tb.Fatalf("Order(%s): %v", id, err)
	}
	return o
}

// checkStatus checks an order's status.
func checkStatus(tb testing.TB, s flashsale.Store, id string, want flashsale.OrderStatus) {
	tb.Helper()
	if got := mustOrder(tb, s, id).Status; got != want {
		tb.Errorf("order %s status = %q, want %q", id, got, want)
	}
}

// mustTransition runs a transition that must succeed.
func mustTransition(tb testing.TB, s flashsale.Store, id string, from, to flashsale.OrderStatus, ref string) *flashsale.Order {
	tb.Helper()
	o, err := s.Transition(tb.Context(), id, from, to, ref, now.Add(time.Minute))
	if err != nil {
		tb.Fatalf("Transition(%s, %s -> %s): %v", id, from, to, err)
	}
	return o
}

func testSale(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		want := newSale("s1", 3, 5, 0, 7)
		want.PurchaseToken = true
		withRules(want)
		mustCreateSale(t, s, want)
		mustCreateSale(t, s, newSale("s2", 1, 1))

		got, err := s.Sale(t.Context(), "s1")
		if err != nil {
			t.Fatalf("Sale: %v", err)
		}
		if diff := cmp.Diff(want, got, msTime); diff != "" {
			t.Errorf("Sale mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Defaults", func(t *testing.T) {
		s := open(t)
		want := newSale("s1", 1, 5)
		mustCreateSale(t, s, want)
		got, err := s.Sale(t.Context(), "s1")
		if err != nil {
			t.Fatalf("Sale: %v", err)
		}
		if diff := cmp.Diff(want, got, msTime); diff != "" {
			t.Errorf("Sale mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 1, 5))
		if _, err := s.Sale(t.Context(), "nope"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Sale(nope) = %v, want ErrNotFound", err)
		}
	})
}

// withRules gives sale every rule a sale may carry, each field a value of
// its own (three different limit overrides, one of them off), so a store
// that drops or swaps a column fails the round trip.
func withRules(sale *flashsale.Sale) {
	rate := func(v string) *flashsale.Rate {
		r, err := flashsale.ParseRate(v)
		if err != nil {
			panic(err)
		}
		return &r
	}
	sale.PurchaseToken = true
	sale.Eligibility = flashsale.Eligibility{MinTier: flashsale.TierGold, MinStays30d: 2, Channels: []string{"ota-x", "trip.com"}}
	sale.Limits = flashsale.SaleLimits{PerSale: rate("300/s,600"), PerUser: rate("5/m,10"), PerIP: rate("off")}
	sale.Challenge.Difficulty = 18
	// A rate with a fraction binary floating point cannot hold exactly.
	sale.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 45, AdmitPerSecond: 12.3, AdmissionSeconds: 90}
	// Tiers up to the sale's per-user limit (a tier above it is invalid).
	sale.PriceTiers = nil
	for rooms := 2; rooms <= min(sale.PerUserLimit, 3); rooms++ {
		sale.PriceTiers = append(sale.PriceTiers, flashsale.PriceTier{Rooms: rooms, Price: sale.Price - int64(100*rooms)})
	}
}

func testSales(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		a := newSale("a", 1, 5)
		a.StartsAt, a.EndsAt = now.Add(2*time.Hour), now.Add(4*time.Hour)
		b := newSale("b", 1, 5, 6)
		b.StartsAt, b.EndsAt = now.Add(time.Hour), now.Add(5*time.Hour)
		withRules(b)
		ended := newSale("ended", 1, 5)
		ended.StartsAt, ended.EndsAt = now.Add(-3*time.Hour), now.Add(-time.Hour)
		boundary := newSale("boundary", 1, 5) // ends exactly now: not after now
		boundary.StartsAt, boundary.EndsAt = now.Add(-3*time.Hour), now
		running := newSale("running", 1, 5)
		running.StartsAt, running.EndsAt = now.Add(-3*time.Hour), now.Add(time.Millisecond)
		for _, sale := range []*flashsale.Sale{a, ended, b, boundary, running} {
			mustCreateSale(t, s, sale)
		}

		got, err := s.Sales(t.Context(), now)
		if err != nil {
			t.Fatalf("Sales: %v", err)
		}
		if diff := cmp.Diff([]*flashsale.Sale{running, b, a}, got, msTime); diff != "" {
			t.Errorf("Sales mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		s := open(t)
		got, err := s.Sales(t.Context(), now)
		if err != nil {
			t.Fatalf("Sales: %v", err)
		}
		if len(got) != 0 {
			t.Errorf("Sales on an empty store = %d sales, want 0", len(got))
		}
	})
}

func testNightStocks(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 5, 0, 7))
		checkNights(t, s, sale, hs{}, hs{}, hs{})

		placeWant(t, s, []error{nil, nil}, res("o1", "s1", "u1", "", 2, 1, 2), res("o2", "s1", "u2", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 1}, hs{}, hs{held: 2})
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay")
		checkNights(t, s, sale, hs{held: 1}, hs{}, hs{sold: 2})
	})
}

func testPlaceOrders(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5, 5, 5))
		placeWant(t, s, []error{nil, nil, nil},
			res("o1", "s1", "u1", "k1", 0, 3, 2),
			res("o2", "s1", "u2", "", 1, 1, 1),
			res("o3", "s1", "u1", "", 2, 1, 3), // u1 now has 5 rooms: exactly the limit
		)
		checkNights(t, s, sale, hs{held: 2}, hs{held: 3}, hs{held: 5})
		for _, id := range []string{"o1", "o2", "o3"} {
			checkStatus(t, s, id, flashsale.OrderHeld)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 1, 5))
		if errs := place(t, s); len(errs) != 0 {
			t.Errorf("PlaceOrders(nil) = %v, want no results", errs)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		// A reservation for an unknown sale is refused before anything is
		// written: no order row, no key bound, and a redelivery is refused
		// the same way rather than found as a duplicate.
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5))
		r := res("o1", "nope", "u1", "k1", 0, 1, 1)
		placeWant(t, s, []error{nil, flashsale.ErrNotFound, flashsale.ErrNotFound},
			res("o0", "s1", "u1", "k1", 0, 1, 1), r, r)
		if _, err := s.Order(t.Context(), "o1"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Order(o1) of an unknown sale = %v, want ErrNotFound", err)
		}
		if _, err := s.OrderByKey(t.Context(), "nope", "u1", "k1"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("OrderByKey(nope, u1, k1) = %v, want ErrNotFound", err)
		}
		checkNights(t, s, sale, hs{held: 1})
		// The ID was not taken: the same order for the real sale goes in.
		placeWant(t, s, []error{nil}, res("o1", "s1", "u2", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 2})
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		// A stay the stock engine never produces is refused without a row,
		// and the rest of the batch goes through.
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5, 5))
		placeWant(t, s, []error{flashsale.ErrInvalid, flashsale.ErrInvalid, flashsale.ErrInvalid, nil},
			res("o1", "s1", "u1", "", 0, 1, 0),
			res("o2", "s1", "u1", "", 0, 0, 1),
			res("o3", "s1", "u1", "", -1, 2, 1),
			res("o4", "s1", "u1", "", 0, 1, 1))
		for _, id := range []string{"o1", "o2", "o3"} {
			if _, err := s.Order(t.Context(), id); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("Order(%s) of an invalid reservation = %v, want ErrNotFound", id, err)
			}
		}
		checkNights(t, s, sale, hs{held: 1}, hs{})
	})
	t.Run("ErrDuplicate", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 5))
		o1 := res("o1", "s1", "u1", "k1", 0, 1, 1)
		placeWant(t, s, []error{nil}, o1)
		// A redelivery changes nothing: not the counters, not the user's rooms.
		placeWant(t, s, []error{flashsale.ErrDuplicate}, o1)
		checkNights(t, s, sale, hs{held: 1})
		checkStatus(t, s, "o1", flashsale.OrderHeld)
		// Still 1 room left for u1 (limit 2): had the redelivery counted, this fails.
		placeWant(t, s, []error{nil}, res("o2", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 2})

		// A redelivery after the hold expired does not revive the order.
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderExpired, "")
		placeWant(t, s, []error{flashsale.ErrDuplicate}, o1)
		checkStatus(t, s, "o1", flashsale.OrderExpired)
		checkNights(t, s, sale, hs{held: 1})
	})
	t.Run("ErrDuplicateInBatch", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5))
		o1 := res("o1", "s1", "u1", "", 0, 1, 1)
		placeWant(t, s, []error{nil, flashsale.ErrDuplicate, flashsale.ErrDuplicate}, o1, o1, o1)
		checkNights(t, s, sale, hs{held: 1})
	})
	t.Run("ErrDuplicateOfFailed", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 1))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o1", "s1", "u1", "", 0, 1, 2))
		placeWant(t, s, []error{flashsale.ErrDuplicate}, res("o1", "s1", "u1", "", 0, 1, 1))
		checkStatus(t, s, "o1", flashsale.OrderFailed)
		checkNights(t, s, sale, hs{})
	})
	t.Run("ErrSoldOut", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 3))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 1, 2))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o2", "s1", "u2", "k2", 0, 1, 2))
		checkNights(t, s, sale, hs{held: 2})
		checkStatus(t, s, "o2", flashsale.OrderFailed)
		// The failed order keeps its key: a retry with the same key is the same purchase.
		got, err := s.OrderByKey(t.Context(), "s1", "u2", "k2")
		if err != nil || got.ID != "o2" {
			t.Errorf("OrderByKey(u2, k2) = %v, %v; want o2", got, err)
		}
		// The failed order took nothing from u2's limit (5): 1 room still fits.
		placeWant(t, s, []error{nil}, res("o3", "s1", "u2", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 3})
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o4", "s1", "u3", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 3})
	})
	t.Run("ErrSoldOutZeroStock", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 0))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o1", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{})
	})
	t.Run("ErrSoldOutMultiNight", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5, 1, 5))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 1, 1, 1))
		// Nights 0 and 2 have stock, night 1 has none: all or nothing.
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o2", "s1", "u2", "", 0, 3, 1))
		checkNights(t, s, sale, hs{}, hs{held: 1}, hs{})
		checkStatus(t, s, "o2", flashsale.OrderFailed)
		// Night 0 short by one while night 1 is fine.
		placeWant(t, s, []error{nil}, res("o3", "s1", "u3", "", 0, 1, 4))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o4", "s1", "u4", "", 0, 1, 2))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o5", "s1", "u5", "", 1, 2, 1))
		placeWant(t, s, []error{nil}, res("o6", "s1", "u6", "", 2, 1, 2))
		checkNights(t, s, sale, hs{held: 4}, hs{held: 1}, hs{held: 2})
	})
	t.Run("ErrSoldOutPastLastNight", func(t *testing.T) {
		// A stay that runs past the sale's last night has no stock for the
		// missing nights; the guard must not count only the nights it found.
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 5, 5))
		placeWant(t, s, []error{flashsale.ErrSoldOut}, res("o1", "s1", "u1", "", 1, 2, 1))
		checkNights(t, s, sale, hs{}, hs{})
	})
	t.Run("ErrLimitExceeded", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 3, 10, 10))
		other := mustCreateSale(t, s, newSale("s2", 3, 10))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 2, 2))
		// Rooms count per sale across orders, not room-nights: 2 + 2 > 3.
		placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("o2", "s1", "u1", "", 1, 1, 2))
		checkStatus(t, s, "o2", flashsale.OrderFailed)
		checkNights(t, s, sale, hs{held: 2}, hs{held: 2})
		placeWant(t, s, []error{nil}, res("o3", "s1", "u1", "", 1, 1, 1))
		placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("o4", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 2}, hs{held: 3})
		// Other users and other sales have their own counts.
		placeWant(t, s, []error{nil, nil}, res("o5", "s1", "u2", "", 0, 1, 3), res("o6", "s2", "u1", "", 0, 1, 3))
		checkNights(t, s, sale, hs{held: 5}, hs{held: 3})
		checkNights(t, s, other, hs{held: 3})
	})
	t.Run("ErrLimitExceededFirstOrder", func(t *testing.T) {
		// More rooms than the limit in the user's very first order.
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 10))
		placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("o1", "s1", "u1", "", 0, 1, 3))
		checkStatus(t, s, "o1", flashsale.OrderFailed)
		checkNights(t, s, sale, hs{})
		// And it left no trace in the user's count.
		placeWant(t, s, []error{nil}, res("o2", "s1", "u1", "", 0, 1, 2))
		checkNights(t, s, sale, hs{held: 2})
	})
	t.Run("ErrLimitExceededInBatch", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 10))
		placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded, nil},
			res("o1", "s1", "u1", "", 0, 1, 1),
			res("o2", "s1", "u1", "", 0, 1, 1),
			res("o3", "s1", "u2", "", 0, 1, 1),
		)
		checkNights(t, s, sale, hs{held: 2})
	})
	t.Run("ErrKeyConflict", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 10))
		other := mustCreateSale(t, s, newSale("s2", 5, 10))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "k", 0, 1, 1))
		placeWant(t, s, []error{flashsale.ErrKeyConflict}, res("o2", "s1", "u1", "k", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 1})
		o2 := mustOrder(t, s, "o2")
		if o2.Status != flashsale.OrderFailed || o2.IdempotencyKey != "" {
			t.Errorf("o2 = %s with key %q, want failed without the key", o2.Status, o2.IdempotencyKey)
		}
		if got, err := s.OrderByKey(t.Context(), "s1", "u1", "k"); err != nil || got.ID != "o1" {
			t.Errorf("OrderByKey(s1, u1, k) = %v, %v; want o1", got, err)
		}
		// The same key is free for another user and in another sale.
		placeWant(t, s, []error{nil, nil}, res("o3", "s1", "u2", "k", 0, 1, 1), res("o4", "s2", "u1", "k", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 2})
		checkNights(t, s, other, hs{held: 1})
		// The conflicting order took nothing from u1's limit (5): 4 rooms fit.
		placeWant(t, s, []error{nil}, res("o5", "s1", "u1", "", 0, 1, 4))
		checkNights(t, s, sale, hs{held: 6})
	})
	t.Run("ErrKeyConflictInBatch", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 5, 10))
		placeWant(t, s, []error{nil, flashsale.ErrKeyConflict},
			res("o1", "s1", "u1", "k", 0, 1, 1), res("o2", "s1", "u1", "k", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 1})
	})
	t.Run("NoKey", func(t *testing.T) {
		// Orders without a key never conflict with each other.
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 3, 10))
		placeWant(t, s, []error{nil, nil, nil},
			res("o1", "s1", "u1", "", 0, 1, 1), res("o2", "s1", "u1", "", 0, 1, 1), res("o3", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 3})
	})
	t.Run("MixedBatch", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 4, 1))
		placeWant(t, s, []error{nil}, res("old", "s1", "u9", "kold", 0, 1, 1))
		rs := []flashsale.Reservation{
			res("r1", "s1", "u1", "k1", 0, 1, 1),    // ok: night 0 has 2 held
			res("old", "s1", "u9", "kold", 0, 1, 1), // redelivery
			res("r1", "s1", "u1", "k1", 0, 1, 1),    // redelivery within the batch
			res("r4", "s1", "u2", "", 0, 2, 2),      // night 1 has 1: must not touch night 0
			res("r5", "s1", "u1", "", 0, 1, 2),      // u1: 1 + 2 > 2
			res("r6", "s1", "u9", "kold", 0, 1, 1),  // key held by old
			res("r7", "s1", "u3", "", 0, 2, 1),      // ok: night 0 has 3 held, night 1 full
			res("r8", "s1", "u4", "", 0, 1, 2),      // night 0 has 1 left
			res("r9", "s1", "u5", "", 0, 1, 1),      // ok: night 0 full
			res("r10", "s1", "u6", "", 1, 1, 1),     // night 1 full
		}
		want := []error{
			nil, flashsale.ErrDuplicate, flashsale.ErrDuplicate, flashsale.ErrSoldOut, flashsale.ErrLimitExceeded,
			flashsale.ErrKeyConflict, nil, flashsale.ErrSoldOut, nil, flashsale.ErrSoldOut,
		}
		placeWant(t, s, want, rs...)
		checkNights(t, s, sale, hs{held: 4}, hs{held: 1})
		wantStatus := map[string]flashsale.OrderStatus{
			"old": flashsale.OrderHeld, "r1": flashsale.OrderHeld, "r4": flashsale.OrderFailed,
			"r5": flashsale.OrderFailed, "r6": flashsale.OrderFailed, "r7": flashsale.OrderHeld,
			"r8": flashsale.OrderFailed, "r9": flashsale.OrderHeld, "r10": flashsale.OrderFailed,
		}
		for id, st := range wantStatus {
			checkStatus(t, s, id, st)
		}
		if got := mustOrder(t, s, "r6").IdempotencyKey; got != "" {
			t.Errorf("r6 key = %q, want none", got)
		}
		if got, err := s.OrderByKey(t.Context(), "s1", "u9", "kold"); err != nil || got.ID != "old" {
			t.Errorf("OrderByKey(u9, kold) = %v, %v; want old", got, err)
		}
	})
}

func testOrder(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 5, 5, 5, 5))
		before := time.Now().Add(-time.Minute)
		r := res("o1", "s1", "u1", "k1", 1, 2, 2)
		placeWant(t, s, []error{nil}, r)
		got := mustOrder(t, s, "o1")
		want := &flashsale.Order{
			ID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", Status: flashsale.OrderHeld,
			FirstNight: 1, CheckIn: "2026-12-25", Nights: 2, Rooms: 2, Amount: r.Amount, Currency: "CNY",
			HoldExpiresAt: r.HoldExpiresAt,
		}
		if diff := cmp.Diff(want, got, msTime, ignoreStamps); diff != "" {
			t.Errorf("Order mismatch (-want +got):\n%s", diff)
		}
		if got.CreatedAt.Before(before) || got.UpdatedAt.Before(got.CreatedAt.Truncate(time.Millisecond)) {
			t.Errorf("Order created_at %v updated_at %v, want set when placed", got.CreatedAt, got.UpdatedAt)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 5, 1))
		r := res("o1", "s1", "u1", "k1", 0, 1, 2)
		placeWant(t, s, []error{flashsale.ErrSoldOut}, r)
		want := &flashsale.Order{
			ID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", Status: flashsale.OrderFailed,
			FirstNight: 0, CheckIn: "2026-12-24", Nights: 1, Rooms: 2, Amount: r.Amount, Currency: "CNY",
			HoldExpiresAt: r.HoldExpiresAt, FailureReason: flashsale.ESoldOut,
		}
		if diff := cmp.Diff(want, mustOrder(t, s, "o1"), msTime, ignoreStamps); diff != "" {
			t.Errorf("Order mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 5, 5))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 1, 1))
		if _, err := s.Order(t.Context(), "o2"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Order(o2) = %v, want ErrNotFound", err)
		}
	})
}

func testOrderByKey(t *testing.T, open OpenFunc) {
	s := open(t)
	mustCreateSale(t, s, newSale("s1", 5, 5))
	mustCreateSale(t, s, newSale("s2", 5, 5))
	placeWant(t, s, []error{nil, nil, nil},
		res("o1", "s1", "u1", "k1", 0, 1, 1),
		res("o2", "s1", "u1", "", 0, 1, 1),
		res("o3", "s2", "u1", "k1", 0, 1, 1))
	t.Run("OK", func(t *testing.T) {
		for _, tc := range []struct{ sale, user, key, want string }{
			{"s1", "u1", "k1", "o1"},
			{"s2", "u1", "k1", "o3"},
		} {
			got, err := s.OrderByKey(t.Context(), tc.sale, tc.user, tc.key)
			if err != nil {
				t.Fatalf("OrderByKey(%s, %s, %s): %v", tc.sale, tc.user, tc.key, err)
			}
			if diff := cmp.Diff(mustOrder(t, s, tc.want), got, msTime); diff != "" {
				t.Errorf("OrderByKey(%s, %s, %s) mismatch (-want +got):\n%s", tc.sale, tc.user, tc.key, diff)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, tc := range []struct{ sale, user, key string }{
			{"s1", "u2", "k1"}, {"s1", "u1", "k2"}, {"s3", "u1", "k1"}, {"s1", "u1", ""},
		} {
			if _, err := s.OrderByKey(t.Context(), tc.sale, tc.user, tc.key); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("OrderByKey(%q, %q, %q) = %v, want ErrNotFound", tc.sale, tc.user, tc.key, err)
			}
		}
	})
}

// transitionFixture opens a store with one 3-night sale (stock 5 each,
// limit 2) and order o1 of u1 for 2 rooms on nights 0-1, moved to from.
func transitionFixture(t *testing.T, open OpenFunc, from flashsale.OrderStatus) (flashsale.Store, *flashsale.Sale) {
	t.Helper()
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 2, 5, 5, 5))
	switch from {
	case flashsale.OrderFailed:
		placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("o1", "s1", "u1", "", 0, 2, 3))
		return s, sale
	default:
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 2, 2))
	}
	switch from {
	case flashsale.OrderPaid, flashsale.OrderExpired, flashsale.OrderCancelled:
		mustTransition(t, s, "o1", flashsale.OrderHeld, from, "pay-0")
	}
	return s, sale
}

// countersFor returns the expected counters of transitionFixture's sale
// when o1 is in status st.
func countersFor(st flashsale.OrderStatus) []hs {
	switch st {
	case flashsale.OrderHeld:
		return []hs{{held: 2}, {held: 2}, {}}
	case flashsale.OrderPaid:
		return []hs{{sold: 2}, {sold: 2}, {}}
	}
	return []hs{{}, {}, {}}
}

// checkUserCounted checks whether o1's 2 rooms count against u1's limit of
// 2, by placing one more room for u1 (which changes the counters).
func checkUserCounted(t *testing.T, s flashsale.Store, counted bool) {
	t.Helper()
	want := error(nil)
	if counted {
		want = flashsale.ErrLimitExceeded
	}
	placeWant(t, s, []error{want}, res("probe", "s1", "u1", "", 2, 1, 1))
}

func testTransition(t *testing.T, open OpenFunc) {
	t.Run("Legal", func(t *testing.T) {
		for _, from := range statuses {
			for _, to := range statuses {
				if !legal(from, to) {
					continue
				}
				t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) {
					s, sale := transitionFixture(t, open, from)
					ref := ""
					if to == flashsale.OrderPaid {
						ref = "pay-1"
					}
					at := now.Add(5*time.Minute + 333333)
					got, err := s.Transition(t.Context(), "o1", from, to, ref, at)
					if err != nil {
						t.Fatalf("Transition: %v", err)
					}
					if got.ID != "o1" || got.Status != to || got.Rooms != 2 || got.CheckIn != "2026-12-24" {
						t.Errorf("Transition returned %+v, want o1 in %s", got, to)
					}
					if !got.UpdatedAt.Truncate(time.Millisecond).Equal(at.Truncate(time.Millisecond)) {
						t.Errorf("updated_at = %v, want %v", got.UpdatedAt, at)
					}
					if to == flashsale.OrderPaid && got.PaymentRef != ref {
						t.Errorf("payment_ref = %q, want %q", got.PaymentRef, ref)
					}
					if diff := cmp.Diff(got, mustOrder(t, s, "o1"), msTime); diff != "" {
						t.Errorf("Order after Transition mismatch (-returned +stored):\n%s", diff)
					}
					checkNights(t, s, sale, countersFor(to)...)
					checkUserCounted(t, s, to.Active())
				})
			}
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, from := range []flashsale.OrderStatus{
			flashsale.OrderHeld, flashsale.OrderPaid, flashsale.OrderExpired, flashsale.OrderCancelled, flashsale.OrderFailed,
		} {
			t.Run(string(from), func(t *testing.T) {
				s, sale := transitionFixture(t, open, from)
				for _, f := range statuses {
					for _, to := range statuses {
						if legal(f, to) {
							continue
						}
						if _, err := s.Transition(t.Context(), "o1", f, to, "pay-x", now); !errors.Is(err, flashsale.ErrInvalid) {
							t.Errorf("Transition(%s -> %s) = %v, want ErrInvalid", f, to, err)
						}
					}
				}
				checkStatus(t, s, "o1", from)
				checkNights(t, s, sale, countersFor(from)...)
				checkUserCounted(t, s, from.Active())
			})
		}
	})
	t.Run("ErrStale", func(t *testing.T) {
		for _, tc := range []struct {
			status   flashsale.OrderStatus // o1's real status
			from, to flashsale.OrderStatus // the transition attempted
		}{
			{flashsale.OrderPaid, flashsale.OrderHeld, flashsale.OrderExpired},
			{flashsale.OrderPaid, flashsale.OrderHeld, flashsale.OrderPaid},
			{flashsale.OrderPaid, flashsale.OrderExpired, flashsale.OrderPaid},
			{flashsale.OrderExpired, flashsale.OrderHeld, flashsale.OrderPaid},
			{flashsale.OrderExpired, flashsale.OrderHeld, flashsale.OrderCancelled},
			{flashsale.OrderExpired, flashsale.OrderCancelled, flashsale.OrderPaid},
			{flashsale.OrderCancelled, flashsale.OrderHeld, flashsale.OrderExpired},
			{flashsale.OrderHeld, flashsale.OrderExpired, flashsale.OrderPaid},
			{flashsale.OrderFailed, flashsale.OrderHeld, flashsale.OrderPaid},
			{flashsale.OrderFailed, flashsale.OrderExpired, flashsale.OrderPaid},
		} {
			t.Run(fmt.Sprintf("%s/%s-%s", tc.status, tc.from, tc.to), func(t *testing.T) {
				s, sale := transitionFixture(t, open, tc.status)
				if _, err := s.Transition(t.Context(), "o1", tc.from, tc.to, "pay-x", now); !errors.Is(err, flashsale.ErrStale) {
					t.Errorf("Transition = %v, want ErrStale", err)
				}
				checkStatus(t, s, "o1", tc.status)
				checkNights(t, s, sale, countersFor(tc.status)...)
				checkUserCounted(t, s, tc.status.Active())
			})
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		s, sale := transitionFixture(t, open, flashsale.OrderHeld)
		for _, pair := range [][2]flashsale.OrderStatus{
			{flashsale.OrderHeld, flashsale.OrderPaid},
			{flashsale.OrderHeld, flashsale.OrderExpired},
			{flashsale.OrderExpired, flashsale.OrderPaid},
		} {
			if _, err := s.Transition(t.Context(), "nope", pair[0], pair[1], "", now); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("Transition(nope, %s -> %s) = %v, want ErrNotFound", pair[0], pair[1], err)
			}
		}
		checkNights(t, s, sale, countersFor(flashsale.OrderHeld)...)
	})
	t.Run("RetakeErrSoldOut", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 1, 1))
		placeWant(t, s, []error{nil}, res("a", "s1", "u1", "", 0, 2, 1))
		mustTransition(t, s, "a", flashsale.OrderHeld, flashsale.OrderExpired, "")
		// Someone else takes night 1 only; night 0 stays free.
		placeWant(t, s, []error{nil}, res("b", "s1", "u2", "", 1, 1, 1))
		if _, err := s.Transition(t.Context(), "a", flashsale.OrderExpired, flashsale.OrderPaid, "pay-a", now); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatalf("retake = %v, want ErrSoldOut", err)
		}
		checkStatus(t, s, "a", flashsale.OrderExpired)
		checkNights(t, s, sale, hs{}, hs{held: 1})
		// Nothing changed for u1 either: a new order of theirs still fits.
		placeWant(t, s, []error{nil}, res("c", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 1}, hs{held: 1})

		// Once the rooms come back, the retake succeeds.
		mustTransition(t, s, "b", flashsale.OrderHeld, flashsale.OrderCancelled, "")
		mustTransition(t, s, "c", flashsale.OrderHeld, flashsale.OrderExpired, "")
		mustTransition(t, s, "a", flashsale.OrderExpired, flashsale.OrderPaid, "pay-a")
		checkNights(t, s, sale, hs{sold: 1}, hs{sold: 1})
		placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("d", "s1", "u1", "", 0, 1, 1))
	})
	t.Run("RetakeErrLimitExceeded", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 10))
		placeWant(t, s, []error{nil}, res("a", "s1", "u1", "", 0, 1, 2))
		mustTransition(t, s, "a", flashsale.OrderHeld, flashsale.OrderCancelled, "")
		placeWant(t, s, []error{nil}, res("b", "s1", "u1", "", 0, 1, 1))
		if _, err := s.Transition(t.Context(), "a", flashsale.OrderCancelled, flashsale.OrderPaid, "pay-a", now); !errors.Is(err, flashsale.ErrLimitExceeded) {
			t.Fatalf("retake = %v, want ErrLimitExceeded", err)
		}
		checkStatus(t, s, "a", flashsale.OrderCancelled)
		checkNights(t, s, sale, hs{held: 1})
		// u1 still has exactly 1 room counted: one more fits, a second does not.
		placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded},
			res("c", "s1", "u1", "", 0, 1, 1), res("d", "s1", "u1", "", 0, 1, 1))
		checkNights(t, s, sale, hs{held: 2})
	})
	t.Run("Race", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 5, 5))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 2, 2))
		errs := make([]error, 50)
		together(len(errs), func(i int) {
			_, errs[i] = s.Transition(t.Context(), "o1", flashsale.OrderHeld, flashsale.OrderExpired, "", now)
		})
		if won := wins(t, "Transition", errs, flashsale.ErrStale); won != 1 {
			t.Errorf("%d transitions won, want exactly 1", won)
		}
		checkStatus(t, s, "o1", flashsale.OrderExpired)
		checkNights(t, s, sale, hs{}, hs{})
		// u1's rooms were given back once: 2 fit again, a third does not.
		placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded},
			res("o2", "s1", "u1", "", 0, 1, 2), res("o3", "s1", "u1", "", 1, 1, 1))
		checkNights(t, s, sale, hs{held: 2}, hs{})
	})
}

// expireFixture opens a store with two sales and nine orders whose holds
// end around now: five due and held (o1, o8, o3, o2, o4 oldest first, o4
// ending exactly now), and four that ExpireHolds must leave alone: o5 (due
// 1 ms after now), o6 (already expired), o7 (paid) and o9 (failed, never
// held). u1 has two due orders in s1 and one in s2, so the user counters
// are aggregated across orders and kept per sale.
func expireFixture(t *testing.T, open OpenFunc) (s flashsale.Store, s1, s2 *flashsale.Sale) {
	t.Helper()
	s = open(t)
	s1 = mustCreateSale(t, s, newSale("s1", 5, 10, 10, 10))
	s2 = mustCreateSale(t, s, newSale("s2", 5, 10))
	at := func(id, saleID, userID string, first, nights, rooms int, d time.Duration) flashsale.Reservation {
		r := res(id, saleID, userID, "", first, nights, rooms)
		r.HoldExpiresAt = now.Add(d).In(cst)
		return r
	}
	placeWant(t, s, make([]error, 8),
		at("o1", "s1", "u1", 0, 2, 2, -3*time.Minute),
		at("o2", "s1", "u2", 0, 1, 1, -time.Minute),
		at("o3", "s1", "u1", 1, 2, 1, -2*time.Minute),
		at("o4", "s1", "u3", 2, 1, 1, 0), // ends exactly now: due
		at("o5", "s1", "u2", 0, 1, 1, time.Millisecond),
		at("o6", "s1", "u4", 0, 1, 1, -5*time.Minute),
		at("o7", "s1", "u5", 0, 1, 1, -4*time.Minute),
		at("o8", "s2", "u1", 0, 1, 2, -150*time.Second),
	)
	mustTransition(t, s, "o6", flashsale.OrderHeld, flashsale.OrderExpired, "")
	mustTransition(t, s, "o7", flashsale.OrderHeld, flashsale.OrderPaid, "pay")
	placeWant(t, s, []error{flashsale.ErrLimitExceeded}, at("o9", "s1", "u6", 0, 1, 6, -10*time.Minute))
	checkNights(t, s, s1, hs{held: 4, sold: 1}, hs{held: 3}, hs{held: 2})
	checkNights(t, s, s2, hs{held: 2})
	return s, s1, s2
}

// orderIDs returns the IDs of os in order.
func orderIDs(os []*flashsale.Order) []string {
	out := []string{}
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

// mustExpire calls ExpireHolds, which must succeed, and checks that every
// returned order is expired at when and that Order agrees with it.
func mustExpire(t *testing.T, s flashsale.Store, when time.Time, limit int) []*flashsale.Order {
	t.Helper()
	got, err := s.ExpireHolds(t.Context(), when, limit)
	if err != nil {
		t.Fatalf("ExpireHolds(limit %d): %v", limit, err)
	}
	for _, o := range got {
		if o.Status != flashsale.OrderExpired {
			t.Errorf("ExpireHolds returned %s in %s, want expired", o.ID, o.Status)
		}
		if !o.UpdatedAt.Truncate(time.Millisecond).Equal(when.Truncate(time.Millisecond)) {
			t.Errorf("ExpireHolds returned %s with updated_at %v, want %v", o.ID, o.UpdatedAt, when)
		}
		if diff := cmp.Diff(mustOrder(t, s, o.ID), o, msTime); diff != "" {
			t.Errorf("ExpireHolds order %s mismatch (-Order +ExpireHolds):\n%s", o.ID, diff)
		}
	}
	return got
}

func testExpireHolds(t *testing.T, open OpenFunc) {
	// when has a sub-millisecond part and a zone: o5 (due 1 ms after now)
	// must still not be due, and UpdatedAt must be when at ms precision.
	when := now.Add(999 * time.Microsecond).In(cst)
	t.Run("OK", func(t *testing.T) {
		s, s1, s2 := expireFixture(t, open)
		untouched := map[string]*flashsale.Order{}
		for _, id := range []string{"o5", "o6", "o7", "o9"} {
			untouched[id] = mustOrder(t, s, id)
		}

		// An hour earlier nothing is due, and nothing changes.
		if got := mustExpire(t, s, now.Add(-time.Hour), 10); len(got) != 0 {
			t.Errorf("ExpireHolds an hour earlier = %v, want none", orderIDs(got))
		}
		checkNights(t, s, s1, hs{held: 4, sold: 1}, hs{held: 3}, hs{held: 2})

		got := mustExpire(t, s, when, 5) // exactly the number due
		if diff := cmp.Diff([]string{"o1", "o8", "o3", "o2", "o4"}, orderIDs(got)); diff != "" {
			t.Errorf("ExpireHolds mismatch (-want +got):\n%s", diff)
		}
		// Only o5's hold and o7's sale are left.
		checkNights(t, s, s1, hs{held: 1, sold: 1}, hs{}, hs{})
		checkNights(t, s, s2, hs{})
		for id, want := range untouched {
			if diff := cmp.Diff(want, mustOrder(t, s, id), msTime); diff != "" {
				t.Errorf("order %s changed by ExpireHolds (-before +after):\n%s", id, diff)
			}
		}
		if got := mustExpire(t, s, when, 10); len(got) != 0 {
			t.Errorf("second ExpireHolds = %v, want none", orderIDs(got))
		}

		// Each user's rooms went back exactly: u1 (3 rooms expired in s1,
		// 2 in s2) and u3 (1) can buy the whole limit of 5 again, u2 still
		// has o5's room counted, so 4 fit. One more room is over the limit.
		placeWant(t, s, []error{nil, nil, nil, nil, flashsale.ErrLimitExceeded, flashsale.ErrLimitExceeded, flashsale.ErrLimitExceeded, flashsale.ErrLimitExceeded},
			res("p1", "s1", "u1", "", 2, 1, 5),
			res("p2", "s2", "u1", "", 0, 1, 5),
			res("p3", "s1", "u2", "", 1, 1, 4),
			res("p4", "s1", "u3", "", 1, 1, 5),
			res("p5", "s1", "u1", "", 0, 1, 1),
			res("p6", "s2", "u1", "", 0, 1, 1),
			res("p7", "s1", "u2", "", 0, 1, 1),
			res("p8", "s1", "u3", "", 0, 1, 1))
		checkNights(t, s, s1, hs{held: 1, sold: 1}, hs{held: 9}, hs{held: 5})
		checkNights(t, s, s2, hs{held: 5})
	})
	t.Run("Limit", func(t *testing.T) {
		s, s1, s2 := expireFixture(t, open)
		for _, tc := range []struct {
			limit int
			want  []string
			after []hs // s1's counters after the call
		}{
			{2, []string{"o1", "o8"}, []hs{{held: 2, sold: 1}, {held: 1}, {held: 2}}},
			{1, []string{"o3"}, []hs{{held: 2, sold: 1}, {}, {held: 1}}},
			{5, []string{"o2", "o4"}, []hs{{held: 1, sold: 1}, {}, {}}},
			{5, []string{}, []hs{{held: 1, sold: 1}, {}, {}}},
		} {
			got := mustExpire(t, s, when, tc.limit)
			if diff := cmp.Diff(tc.want, orderIDs(got)); diff != "" {
				t.Errorf("ExpireHolds(limit %d) mismatch (-want +got):\n%s", tc.limit, diff)
			}
			checkNights(t, s, s1, tc.after...)
		}
		checkNights(t, s, s2, hs{})
	})
	t.Run("Concurrent", func(t *testing.T) { testExpireHoldsConcurrent(t, open) })
}

// testExpireHoldsConcurrent races reapers against payers: 8 goroutines
// expire 200 due holds in small batches while 8 others pay random ones.
// Every order must end exactly once in expired (returned by exactly one
// ExpireHolds call) or paid (won by exactly one Transition), and the
// counters must balance.
func testExpireHoldsConcurrent(t *testing.T, open OpenFunc) {
	const n = 200
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 1, n, n))
	rs := make([]flashsale.Reservation, n)
	ids := make([]string, n)
	for i := range rs {
		first, nights := i%2, 1
		if first == 0 && i%3 == 0 {
			nights = 2
		}
		rs[i] = res(fmt.Sprintf("o%03d", i), sale.ID, fmt.Sprintf("u%03d", i), "", first, nights, 1)
		rs[i].HoldExpiresAt = now.Add(-time.Duration(n-i) * time.Millisecond)
		ids[i] = rs[i].OrderID
	}
	for batch := range slices.Chunk(rs, 50) {
		placeWant(t, s, make([]error, len(batch)), batch...)
	}

	var (
		mu      sync.Mutex
		expired = map[string]int{} // times each order was returned by ExpireHolds
		paid    = map[string]int{} // times each order was paid
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			<-start
			for {
				got, err := s.ExpireHolds(t.Context(), now, 3+g%5)
				if err != nil {
					t.Errorf("ExpireHolds under contention: %v", err)
					return
				}
				for i := 1; i < len(got); i++ {
					if got[i].HoldExpiresAt.Before(got[i-1].HoldExpiresAt) {
						t.Errorf("ExpireHolds batch %v is not oldest first", orderIDs(got))
					}
				}
				mu.Lock()
				for _, o := range got {
					expired[o.ID]++
				}
				mu.Unlock()
				if len(got) == 0 {
					return
				}
			}
		})
	}
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(5, uint64(g)))
			<-start
			for range n / 8 {
				id := ids[r.IntN(n)]
				_, err := s.Transition(t.Context(), id, flashsale.OrderHeld, flashsale.OrderPaid, "pay-"+id, now)
				switch {
				case err == nil:
					mu.Lock()
					paid[id]++
					mu.Unlock()
				case !errors.Is(err, flashsale.ErrStale):
					t.Errorf("Transition(%s, held -> paid) = %v, want nil or ErrStale", id, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	// A reaper may have stopped on an empty batch while the last holds were
	// locked by a payer; sweep what is left.
	for _, o := range mustExpire(t, s, now, n) {
		expired[o.ID]++
	}
	if t.Failed() {
		t.FailNow()
	}

	sold := make([]int, len(sale.Nights))
	var probes []flashsale.Reservation
	var want []error
	for i, id := range ids {
		e, p := expired[id], paid[id]
		if e+p != 1 {
			t.Errorf("order %s: returned by ExpireHolds %d times and paid %d times, want exactly once in all", id, e, p)
			continue
		}
		wantStatus := flashsale.OrderExpired
		if p == 1 {
			wantStatus = flashsale.OrderPaid
			for j := rs[i].FirstNight; j < rs[i].FirstNight+rs[i].Nights; j++ {
				sold[j]++
			}
		}
		checkStatus(t, s, id, wantStatus)
		// The user's one room (limit 1) is free again only if the order expired.
		probe := rs[i]
		probe.OrderID = "probe-" + id
		probes = append(probes, probe)
		if p == 1 {
			want = append(want, flashsale.ErrLimitExceeded)
		} else {
			want = append(want, nil)
		}
	}
	if len(paid) == 0 || len(paid) == n {
		t.Logf("%d of %d orders paid: the race did not mix reapers and payers", len(paid), n)
	}
	checkNights(t, s, sale, hs{sold: sold[0]}, hs{sold: sold[1]})
	checkBooks(t, s, sale, ids)
	for i := 0; i < len(probes); i += 50 {
		end := min(i+50, len(probes))
		placeWant(t, s, want[i:end], probes[i:end]...)
	}
}

func testSnapshot(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		sale := newSale("s1", 2, 4, 2)
		withRules(sale)
		mustCreateSale(t, s, sale)
		mustCreateSale(t, s, newSale("s2", 2, 3))
		rs := []flashsale.Reservation{
			res("held", "s1", "u1", "k1", 0, 2, 1),
			res("paid", "s1", "u2", "", 1, 1, 1),
			res("expired", "s1", "u3", "k3", 0, 1, 2),
			res("cancelled", "s1", "u4", "", 0, 1, 1),
			res("soldout", "s1", "u5", "k5", 1, 1, 2),
			res("conflict", "s1", "u1", "k1", 0, 1, 1),
			res("other", "s2", "u1", "k1", 0, 1, 1),
		}
		placeWant(t, s, []error{nil, nil, nil, nil, flashsale.ErrSoldOut, flashsale.ErrKeyConflict, nil}, rs...)
		mustTransition(t, s, "paid", flashsale.OrderHeld, flashsale.OrderPaid, "pay")
		mustTransition(t, s, "expired", flashsale.OrderHeld, flashsale.OrderExpired, "")
		mustTransition(t, s, "cancelled", flashsale.OrderHeld, flashsale.OrderCancelled, "")

		got, err := s.Snapshot(t.Context(), "s1")
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if diff := cmp.Diff(sale, got.Sale, msTime); diff != "" {
			t.Errorf("Snapshot.Sale mismatch (-want +got):\n%s", diff)
		}
		wantNights := []flashsale.NightStock{
			{Date: "2026-12-24", Stock: 4, Available: 3, Held: 1},
			{Date: "2026-12-25", Stock: 2, Available: 0, Held: 1, Sold: 1},
		}
		if diff := cmp.Diff(wantNights, got.Nights); diff != "" {
			t.Errorf("Snapshot.Nights mismatch (-want +got):\n%s", diff)
		}
		active := map[string]bool{"held": true, "paid": true}
		var want []flashsale.Reservation
		for _, r := range rs[:6] {
			r.Active = active[r.OrderID]
			if r.OrderID == "conflict" {
				r.IdempotencyKey = ""
			}
			want = append(want, r)
		}
		sortRes := cmpopts.SortSlices(func(a, b flashsale.Reservation) bool { return a.OrderID < b.OrderID })
		if diff := cmp.Diff(want, got.Reservations, msTime, sortRes); diff != "" {
			t.Errorf("Snapshot.Reservations mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("NoOrders", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 2, 3, 2))
		got, err := s.Snapshot(t.Context(), "s1")
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if diff := cmp.Diff(sale, got.Sale, msTime); diff != "" {
			t.Errorf("Snapshot.Sale mismatch (-want +got):\n%s", diff)
		}
		if len(got.Nights) != 2 || len(got.Reservations) != 0 {
			t.Errorf("Snapshot = %d nights, %d reservations; want 2, 0", len(got.Nights), len(got.Reservations))
		}
	})
}

// sortedKeys returns m's keys in order, for deterministic iteration.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
