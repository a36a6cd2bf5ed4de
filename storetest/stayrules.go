package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/google/go-cmp/cmp"
)

// The nights' stay rules (issue 25): kept by date with the sale, read back
// by every read of a sale, and changed by UpdateSale while the nights sell,
// as an operator closes a night mid-sale.

// staySale returns a valid sale of four nights of five rooms (from
// testenv's first night, so they never pass) with rules on three of them:
// length-of-stay bounds on the first, every closing but stop_sell on the
// second, none on the third, stop_sell on the last.
func staySale(id string) *flashsale.Sale {
	s := fixture.Sale(fixture.ID(id), fixture.Stock(5, 5, 5, 5), fixture.Price(69900, 99900), fixture.Limit(2),
		fixture.Window(now.Add(-time.Hour+123456789).In(cst), now.Add(24*time.Hour).In(cst)),
		fixture.Created(now.Add(-2*time.Hour+987654)))
	s.Nights[0].StayRules = flashsale.StayRules{MinStay: 2, MaxStay: 3}
	s.Nights[1].StayRules = flashsale.StayRules{ClosedToArrival: true, ClosedToDeparture: true}
	s.Nights[3].StayRules = flashsale.StayRules{StopSell: true}
	return s
}

func testStayRules(t *testing.T, open OpenFunc) {
	t.Run("ReadBack", func(t *testing.T) {
		// Every read of a sale gives each night its own rules, and a
		// sale without any none (its nights beside the other's).
		s := open(t)
		want := mustCreateSale(t, s, staySale("s1"))
		plain := staySale("s2")
		for i := range plain.Nights {
			plain.Nights[i].StayRules = flashsale.StayRules{}
		}
		mustCreateSale(t, s, plain)
		checkSale(t, s, want)
		checkSale(t, s, plain)
		sales, err := s.Sales(t.Context(), now)
		if err != nil {
			t.Fatalf("Sales: %v", err)
		}
		checkListed(t, "Sales", sales, plain, want)
		list, err := s.ListSales(t.Context(), flashsale.SaleQuery{Now: now})
		if err != nil {
			t.Fatalf("ListSales: %v", err)
		}
		checkListed(t, "ListSales", list, plain, want)
		checkSnapshotSale(t, s, want)
		checkSnapshotSale(t, s, plain)
	})
	t.Run("UpdateInUse", func(t *testing.T) {
		// A change of rules alone is no change of nights: it goes through
		// while a room of the night is held, then sold, and leaves the
		// counters alone.
		s := open(t)
		sale := mustCreateSale(t, s, staySale("s1"))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, 2, 1))

		e := *sale
		e.Nights = append([]flashsale.Night(nil), sale.Nights...)
		e.Nights[0].MinStay = 0
		e.Nights[1].StopSell = true
		c1 := change(flashsale.ChangeEdit, "stay rules", time.Minute)
		if err := s.UpdateSale(t.Context(), &e, 0, c1); errors.Is(err, flashsale.ErrStockInUse) {
			t.Fatalf("UpdateSale of the rules with a room held = %v: a change of rules rewrote the nights", err)
		} else if err != nil {
			t.Fatalf("UpdateSale of the rules with a room held: %v", err)
		}
		checkSale(t, s, &e)
		checkSnapshotSale(t, s, &e)
		checkNights(t, s, &e, hs{held: 1}, hs{held: 1}, hs{}, hs{})

		// Sold, then every rule cleared: the reopened nights read back
		// with none.
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
		f := e
		f.Nights = append([]flashsale.Night(nil), e.Nights...)
		for i := range f.Nights {
			f.Nights[i].StayRules = flashsale.StayRules{}
		}
		c2 := change(flashsale.ChangeEdit, "stay rules cleared", 2*time.Minute)
		if err := s.UpdateSale(t.Context(), &f, 1, c2); err != nil {
			t.Fatalf("UpdateSale clearing the rules with a room sold: %v", err)
		}
		checkSale(t, s, &f)
		checkSnapshotSale(t, s, &f)
		checkNights(t, s, &f, hs{sold: 1}, hs{sold: 1}, hs{}, hs{})
		checkChanges(t, s, "s1", logged(c1, 1), logged(c2, 2))
	})
}

// checkListed compares the sales a listing returned that want names, by
// ID, with want.
func checkListed(tb testing.TB, name string, got []*flashsale.Sale, want ...*flashsale.Sale) {
	tb.Helper()
	byID := make(map[string]*flashsale.Sale, len(got))
	for _, s := range got {
		byID[s.ID] = s
	}
	for _, w := range want {
		if diff := cmp.Diff(w, byID[w.ID], msTime); diff != "" {
			tb.Errorf("%s: sale %s mismatch (-want +got):\n%s", name, w.ID, diff)
		}
	}
}

// checkSnapshotSale compares the sale of a Snapshot, which the stock
// engine loads the rules from, with want.
func checkSnapshotSale(tb testing.TB, s flashsale.Store, want *flashsale.Sale) {
	tb.Helper()
	snap, err := s.Snapshot(tb.Context(), want.ID)
	if err != nil {
		tb.Fatalf("Snapshot(%s): %v", want.ID, err)
	}
	if diff := cmp.Diff(want, snap.Sale, msTime); diff != "" {
		tb.Errorf("Snapshot(%s).Sale mismatch (-want +got):\n%s", want.ID, diff)
	}
}
