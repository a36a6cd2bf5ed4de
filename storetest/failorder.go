package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// failCounters are failFixture's counters, which FailOrder must leave alone.
var failCounters = []hs{{held: 1}, {held: 1}}

// failFixture opens a store with one 2-night sale (stock 5 each, limit 2)
// and o1, u1's held order for 1 room on both nights under key k1, so the
// counters FailOrder must leave alone are not all zero.
func failFixture(t *testing.T, open OpenFunc) (flashsale.Store, *flashsale.Sale) {
	t.Helper()
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 2, 5, 5))
	placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "k1", 0, 2, 1))
	checkCounters(t, s, sale, failCounters...)
	return s, sale
}

// checkCounters checks a sale's counters both ways a store reports them,
// NightStocks and Snapshot, against want, one per night.
func checkCounters(tb testing.TB, s flashsale.Store, sale *flashsale.Sale, want ...hs) {
	tb.Helper()
	checkNights(tb, s, sale, want...)
	if diff := cmp.Diff(nightStocks(sale, want...), mustSnapshot(tb, s, sale.ID).Nights); diff != "" {
		tb.Errorf("Snapshot(%s).Nights mismatch (-want +got):\n%s", sale.ID, diff)
	}
}

// mustSnapshot returns a sale's snapshot or fails the test.
func mustSnapshot(tb testing.TB, s flashsale.Store, saleID string) *flashsale.StockSnapshot {
	tb.Helper()
	snap, err := s.Snapshot(tb.Context(), saleID)
	if err != nil {
		tb.Fatalf("Snapshot(%s): %v", saleID, err)
	}
	return snap
}

// checkSnapshotOrders compares the reservations a sale's snapshot lists
// with want, in any order.
func checkSnapshotOrders(tb testing.TB, s flashsale.Store, saleID string, want ...flashsale.Reservation) {
	tb.Helper()
	sortRes := cmpopts.SortSlices(func(a, b flashsale.Reservation) bool { return a.OrderID < b.OrderID })
	if diff := cmp.Diff(want, mustSnapshot(tb, s, saleID).Reservations, msTime, sortRes, cmpopts.EquateEmpty()); diff != "" {
		tb.Errorf("Snapshot(%s).Reservations mismatch (-want +got):\n%s", saleID, diff)
	}
}

// failOrderWant runs FailOrder and checks its result (nil means success).
func failOrderWant(tb testing.TB, s flashsale.Store, want error, r flashsale.Reservation, reason string) {
	tb.Helper()
	if err := s.FailOrder(tb.Context(), r, reason); !sameErr(err, want) {
		tb.Errorf("FailOrder(%s, %q) = %v, want %v", r.OrderID, reason, err, want)
	}
}

// failedOrder is the order FailOrder writes for r: r failed with reason.
func failedOrder(r flashsale.Reservation, checkIn, reason string) *flashsale.Order {
	return &flashsale.Order{
		ID: r.OrderID, SaleID: r.SaleID, UserID: r.UserID, IdempotencyKey: r.IdempotencyKey,
		Status: flashsale.OrderFailed, FirstNight: r.FirstNight, CheckIn: checkIn, Nights: r.Nights,
		Rooms: r.Rooms, Amount: r.Amount, Currency: "CNY", HoldExpiresAt: r.HoldExpiresAt, FailureReason: reason,
	}
}

// inactive returns r as a snapshot lists it once its order is not active.
func inactive(r flashsale.Reservation) flashsale.Reservation {
	r.Active = false
	return r
}

// checkReason checks an order's status and failure reason.
func checkReason(tb testing.TB, s flashsale.Store, id string, status flashsale.OrderStatus, reason string) {
	tb.Helper()
	if o := mustOrder(tb, s, id); o.Status != status || o.FailureReason != reason {
		tb.Errorf("order %s = %s with reason %q, want %s with reason %q", id, o.Status, o.FailureReason, status, reason)
	}
}

// testFailOrder checks FailOrder: the order path's dead letters become
// failed orders with their reason, and nothing else changes, however the
// reservation clashes with what the database holds. Each concern is a
// subtest of its own, on a fresh store. Every case checks the counters
// both ways they are reported; the user's count, which neither shows, is
// probed with PlaceOrders at the end.
func testFailOrder(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) { testFailOrderOK(t, open) })
	t.Run("ErrDuplicate", func(t *testing.T) { testFailOrderDuplicate(t, open) })
	t.Run("ErrDuplicateOfPlaced", func(t *testing.T) { testFailOrderDuplicateOfPlaced(t, open) })
	t.Run("KeyConflict", func(t *testing.T) { testFailOrderKeyConflict(t, open) })
	t.Run("ErrNotFound", func(t *testing.T) { testFailOrderNotFound(t, open) })
	t.Run("ErrInvalid", func(t *testing.T) { testFailOrderInvalid(t, open) })
	t.Run("PastLastNight", func(t *testing.T) { testFailOrderPastLastNight(t, open) })
	t.Run("LongReason", func(t *testing.T) { testFailOrderLongReason(t, open) })
	t.Run("PlaceOrdersReason", func(t *testing.T) { testPlaceOrdersReason(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testFailOrderConcurrent(t, open) })
	t.Run("RaceWithPlaceOrders", func(t *testing.T) { testFailOrderRaceWithPlaceOrders(t, open) })
}

// testFailOrderOK: a dead letter is written as a failed order with its
// reason and key, and takes nothing: no stock, nothing the reaper would
// expire, no part of its user's limit.
func testFailOrderOK(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r := res("f1", "s1", "u2", "k2", 0, 2, 2)
	r.HoldExpiresAt = now.Add(-time.Minute + 456789).In(cst) // a dead letter's hold has often ended
	before := time.Now().Add(-time.Minute)
	failOrderWant(t, s, nil, r, "dead_lettered")
	checkCounters(t, s, sale, failCounters...)
	checkFailedWritten(t, s, r, before)
	checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r))
	// A failed order is never due: the reaper expires o1 alone.
	if got := mustExpire(t, s, now.Add(time.Hour), 10); len(got) != 1 || got[0].ID != "o1" {
		t.Errorf("ExpireHolds = %v, want [o1]", orderIDs(got))
	}
	checkReason(t, s, "f1", flashsale.OrderFailed, "dead_lettered")
	checkCounters(t, s, sale, hs{}, hs{})
	// f1 took nothing from u2's limit (2): 2 rooms fit, a third does not.
	placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded},
		res("p1", "s1", "u2", "", 0, 1, 2), res("p2", "s1", "u2", "", 1, 1, 1))
	checkCounters(t, s, sale, hs{held: 2}, hs{})
}

// checkFailedWritten checks the order FailOrder wrote for r, a stay from
// the sale's first night, dead-lettered after before: r failed with its
// reason, stamped when it was written, and bound to its key (a retry with
// it is the same purchase).
func checkFailedWritten(t *testing.T, s flashsale.Store, r flashsale.Reservation, before time.Time) {
	t.Helper()
	got := mustOrder(t, s, r.OrderID)
	if diff := cmp.Diff(failedOrder(r, "2026-12-24", "dead_lettered"), got, msTime, ignoreStamps); diff != "" {
		t.Errorf("Order mismatch (-want +got):\n%s", diff)
	}
	if got.CreatedAt.Before(before) || got.UpdatedAt.Before(got.CreatedAt.Truncate(time.Millisecond)) {
		t.Errorf("Order created_at %v updated_at %v, want set when failed", got.CreatedAt, got.UpdatedAt)
	}
	if byKey, err := s.OrderByKey(t.Context(), r.SaleID, r.UserID, r.IdempotencyKey); err != nil {
		t.Errorf("OrderByKey(%s, %s, %s): %v", r.SaleID, r.UserID, r.IdempotencyKey, err)
	} else if diff := cmp.Diff(got, byKey, msTime); diff != "" {
		t.Errorf("OrderByKey(%s, %s, %s) mismatch (-Order +OrderByKey):\n%s", r.SaleID, r.UserID, r.IdempotencyKey, diff)
	}
}

// testFailOrderDuplicate: a second dead letter of the same order, even one
// that says something else, changes nothing, and nor does a late
// redelivery to PlaceOrders.
func testFailOrderDuplicate(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r := res("f1", "s1", "u2", "k2", 0, 1, 1)
	failOrderWant(t, s, nil, r, "first")
	first := mustOrder(t, s, "f1")

	failOrderWant(t, s, flashsale.ErrDuplicate, r, "second")
	other := res("f1", "s1", "u3", "k3", 1, 1, 2)
	failOrderWant(t, s, flashsale.ErrDuplicate, other, "third")
	// The redelivery takes no stock.
	placeWant(t, s, []error{flashsale.ErrDuplicate}, r)

	if diff := cmp.Diff(first, mustOrder(t, s, "f1"), msTime); diff != "" {
		t.Errorf("order f1 changed by a duplicate (-before +after):\n%s", diff)
	}
	checkCounters(t, s, sale, failCounters...)
	checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r))
	if _, err := s.OrderByKey(t.Context(), "s1", "u3", "k3"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("OrderByKey(s1, u3, k3) = %v, want ErrNotFound", err)
	}
	placeWant(t, s, []error{nil}, res("p1", "s1", "u2", "", 0, 1, 2))
	checkCounters(t, s, sale, hs{held: 3}, hs{held: 1})
}

// testFailOrderDuplicateOfPlaced: a dead letter of an order that made it
// after all (the queue redelivered it, and an earlier delivery was
// written) leaves the order as it is, whatever its status: held, expired
// or failed.
func testFailOrderDuplicateOfPlaced(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	o1 := res("o1", "s1", "u1", "k1", 0, 2, 1)
	held := mustOrder(t, s, "o1")
	failOrderWant(t, s, flashsale.ErrDuplicate, o1, "dead_lettered")
	if diff := cmp.Diff(held, mustOrder(t, s, "o1"), msTime); diff != "" {
		t.Errorf("held o1 changed by FailOrder (-before +after):\n%s", diff)
	}
	checkCounters(t, s, sale, failCounters...)
	// u1's room still counts (limit 2): one more fits, a second does not.
	placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded},
		res("p1", "s1", "u1", "", 0, 1, 1), res("p2", "s1", "u1", "", 1, 1, 1))
	checkCounters(t, s, sale, hs{held: 2}, hs{held: 1})

	mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderExpired, "")
	failOrderWant(t, s, flashsale.ErrDuplicate, o1, "dead_lettered")
	checkReason(t, s, "o1", flashsale.OrderExpired, "")
	checkCounters(t, s, sale, hs{held: 1}, hs{})

	o2 := res("o2", "s1", "u2", "k2", 1, 2, 1) // past the last night: sold out
	placeWant(t, s, []error{flashsale.ErrSoldOut}, o2)
	failOrderWant(t, s, flashsale.ErrDuplicate, o2, "dead_lettered")
	checkReason(t, s, "o2", flashsale.OrderFailed, flashsale.ESoldOut)
	checkCounters(t, s, sale, hs{held: 1}, hs{})
}

// testFailOrderKeyConflict: another order of the user holds the key, so
// the failed order is written without it, and the key keeps naming the
// other order; the same key of another user is free.
func testFailOrderKeyConflict(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r := res("f1", "s1", "u1", "k1", 0, 1, 1)
	failOrderWant(t, s, nil, r, "dead_lettered")
	r.IdempotencyKey = ""
	if diff := cmp.Diff(failedOrder(r, "2026-12-24", "dead_lettered"), mustOrder(t, s, "f1"), msTime, ignoreStamps); diff != "" {
		t.Errorf("Order mismatch (-want +got):\n%s", diff)
	}
	if got, err := s.OrderByKey(t.Context(), "s1", "u1", "k1"); err != nil || got.ID != "o1" {
		t.Errorf("OrderByKey(s1, u1, k1) = %v, %v; want o1", got, err)
	}
	r2 := res("f2", "s1", "u2", "k1", 1, 1, 1)
	failOrderWant(t, s, nil, r2, "dead_lettered")
	checkCounters(t, s, sale, failCounters...)
	checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r), inactive(r2))
	// Neither took from u1's count (1 of 2).
	placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded},
		res("p1", "s1", "u1", "", 0, 1, 1), res("p2", "s1", "u1", "", 0, 1, 1))
	checkCounters(t, s, sale, hs{held: 2}, hs{held: 1})
}

// testFailOrderNotFound: there is no sale to attach the order to, so
// nothing is written, and the ID and the key stay free.
func testFailOrderNotFound(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	failOrderWant(t, s, flashsale.ErrNotFound, res("f1", "nope", "u2", "k2", 0, 1, 1), "dead_lettered")
	if _, err := s.Order(t.Context(), "f1"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("Order(f1) of an unknown sale = %v, want ErrNotFound", err)
	}
	if _, err := s.OrderByKey(t.Context(), "nope", "u2", "k2"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("OrderByKey(nope, u2, k2) = %v, want ErrNotFound", err)
	}
	checkCounters(t, s, sale, failCounters...)
	r := res("f1", "s1", "u2", "k2", 0, 1, 1)
	failOrderWant(t, s, nil, r, "dead_lettered")
	checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r))
}

// testFailOrderInvalid: a stay the stock engine never produces is refused
// as PlaceOrders refuses it: nothing written, the ID stays free.
func testFailOrderInvalid(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	for _, r := range []flashsale.Reservation{
		res("f1", "s1", "u2", "", 0, 1, 0),
		res("f1", "s1", "u2", "", 0, 0, 1),
		res("f1", "s1", "u2", "", -1, 2, 1),
	} {
		failOrderWant(t, s, flashsale.ErrInvalid, r, "dead_lettered")
	}
	if _, err := s.Order(t.Context(), "f1"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("Order(f1) of an invalid reservation = %v, want ErrNotFound", err)
	}
	checkCounters(t, s, sale, failCounters...)
	failOrderWant(t, s, nil, res("f1", "s1", "u2", "", 0, 1, 1), "dead_lettered")
	checkCounters(t, s, sale, failCounters...)
}

// testFailOrderPastLastNight: a stay running past the sale's nights is
// recorded like any other, with the check-in date of its first night if
// there is one.
func testFailOrderPastLastNight(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r1 := res("f1", "s1", "u2", "", 1, 3, 1)
	r2 := res("f2", "s1", "u2", "", 5, 1, 1)
	failOrderWant(t, s, nil, r1, "sold_out")
	failOrderWant(t, s, nil, r2, "sold_out")
	for _, tc := range []struct {
		r       flashsale.Reservation
		checkIn string
	}{{r1, "2026-12-25"}, {r2, ""}} {
		if diff := cmp.Diff(failedOrder(tc.r, tc.checkIn, "sold_out"), mustOrder(t, s, tc.r.OrderID), msTime, ignoreStamps); diff != "" {
			t.Errorf("Order(%s) mismatch (-want +got):\n%s", tc.r.OrderID, diff)
		}
	}
	checkCounters(t, s, sale, failCounters...)
}

// testFailOrderLongReason: a reason is kept up to 200 characters, not
// bytes; a longer one is cut rather than losing the order.
func testFailOrderLongReason(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	failOrderWant(t, s, nil, res("f1", "s1", "u2", "", 0, 1, 1), strings.Repeat("é", 300))
	checkReason(t, s, "f1", flashsale.OrderFailed, strings.Repeat("é", 200))
	failOrderWant(t, s, nil, res("f2", "s1", "u2", "", 0, 1, 1), "")
	checkReason(t, s, "f2", flashsale.OrderFailed, "")
	checkCounters(t, s, sale, failCounters...)
}

// testPlaceOrdersReason: orders PlaceOrders fails carry the refusal's
// code, on every path through a batch (see placeRefusals); accepted ones
// carry none, and a redelivery keeps the first answer's reason.
func testPlaceOrdersReason(t *testing.T, open OpenFunc) {
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 2, 4, 1))
	placeRefusals(t, s)
	checkCounters(t, s, sale, hs{held: 4}, hs{held: 1})
	for id, want := range map[string]string{
		"a1": "", "a2": flashsale.ELimitExceeded, "a3": flashsale.EConflict,
		"b1": "", "b2": flashsale.ESoldOut, "b3": flashsale.ELimitExceeded, "b4": "",
		"c1": flashsale.ESoldOut, "c2": flashsale.ELimitExceeded, "c3": flashsale.EConflict,
	} {
		status := flashsale.OrderHeld
		if want != "" {
			status = flashsale.OrderFailed
		}
		checkReason(t, s, id, status, want)
	}
	placeWant(t, s, []error{flashsale.ErrDuplicate}, res("a2", "s1", "u1", "", 1, 1, 1))
	checkReason(t, s, "a2", flashsale.OrderFailed, flashsale.ELimitExceeded)
	checkCounters(t, s, sale, hs{held: 4}, hs{held: 1})
}

// placeRefusals places, on s1 (2 nights of stock 4 and 1, limit 2),
// batches whose orders are refused all together (a), among accepted ones
// (b) and alone (c), for every refusal: the limit, the key, sold out.
func placeRefusals(t *testing.T, s flashsale.Store) {
	t.Helper()
	placeWant(t, s, []error{nil, flashsale.ErrLimitExceeded, flashsale.ErrKeyConflict},
		res("a1", "s1", "u1", "k1", 0, 1, 2),
		res("a2", "s1", "u1", "", 0, 1, 1),
		res("a3", "s1", "u1", "k1", 0, 1, 1))
	placeWant(t, s, []error{nil, flashsale.ErrSoldOut, flashsale.ErrLimitExceeded, nil},
		res("b1", "s1", "u3", "", 0, 2, 1),
		res("b2", "s1", "u4", "k4", 1, 1, 1),
		res("b3", "s1", "u3", "", 0, 1, 2),
		res("b4", "s1", "u5", "", 0, 1, 1))
	placeWant(t, s, []error{flashsale.ErrSoldOut}, res("c1", "s1", "u6", "", 0, 2, 1))
	placeWant(t, s, []error{flashsale.ErrLimitExceeded}, res("c2", "s1", "u7", "", 0, 1, 3))
	placeWant(t, s, []error{flashsale.ErrKeyConflict}, res("c3", "s1", "u4", "k4", 0, 1, 1))
}

// testFailOrderConcurrent: the consumer's instances may dead-letter one
// message at once, and exactly one FailOrder writes it.
func testFailOrderConcurrent(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r := res("f1", "s1", "u2", "k2", 0, 2, 1)
	errs := make([]error, 32)
	together(len(errs), func(i int) { errs[i] = s.FailOrder(t.Context(), r, "dead_lettered") })
	if won := wins(t, "FailOrder", errs, flashsale.ErrDuplicate); won != 1 {
		t.Errorf("%d FailOrder calls won, want exactly 1", won)
	}
	checkReason(t, s, "f1", flashsale.OrderFailed, "dead_lettered")
	checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r))
	checkCounters(t, s, sale, failCounters...)
}

// testFailOrderRaceWithPlaceOrders: a dead letter racing a redelivery of
// the same reservation: one of them writes the order, and the counters
// agree with which.
func testFailOrderRaceWithPlaceOrders(t *testing.T, open OpenFunc) {
	s, sale := failFixture(t, open)
	r := res("f1", "s1", "u2", "k2", 0, 2, 1)
	placed, failed := make([]error, 16), make([]error, 16)
	together(len(placed), func(i int) {
		errs, err := s.PlaceOrders(t.Context(), []flashsale.Reservation{r})
		if err != nil {
			placed[i] = err
			return
		}
		placed[i] = errs[0]
	}, func(i int) {
		failed[i] = s.FailOrder(t.Context(), r, "dead_lettered")
	})
	wonPlace, wonFail := wins(t, "PlaceOrders", placed, flashsale.ErrDuplicate), wins(t, "FailOrder", failed, flashsale.ErrDuplicate)
	if wonPlace+wonFail != 1 {
		t.Fatalf("%d PlaceOrders and %d FailOrder calls won, want exactly 1 in all", wonPlace, wonFail)
	}
	if wonPlace == 1 {
		checkReason(t, s, "f1", flashsale.OrderHeld, "")
		checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), r)
		checkCounters(t, s, sale, hs{held: 2}, hs{held: 2})
	} else {
		checkReason(t, s, "f1", flashsale.OrderFailed, "dead_lettered")
		checkSnapshotOrders(t, s, "s1", res("o1", "s1", "u1", "k1", 0, 2, 1), inactive(r))
		checkCounters(t, s, sale, failCounters...)
	}
}
