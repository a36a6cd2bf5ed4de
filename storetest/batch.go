package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testRevisions: the catalog's refresh reads the current sales' revisions
// alone and the moved ones in full, so a store whose revisions left out a
// current sale, kept an ended one, or missed a move (an edit, added rooms)
// would leave an instance selling from an old sale.
func testRevisions(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		a := newSale("a", 1, 5)
		a.StartsAt, a.EndsAt = now.Add(2*time.Hour), now.Add(4*time.Hour)
		ended := newSale("ended", 1, 5)
		ended.StartsAt, ended.EndsAt = now.Add(-3*time.Hour), now.Add(-time.Hour)
		boundary := newSale("boundary", 1, 5) // ends exactly now: not after now
		boundary.StartsAt, boundary.EndsAt = now.Add(-3*time.Hour), now
		running := newSale("running", 1, 5, 6)
		running.StartsAt, running.EndsAt = now.Add(-3*time.Hour), now.Add(time.Millisecond)
		for _, sale := range []*flashsale.Sale{a, ended, boundary, running} {
			mustCreateSale(t, s, sale)
		}
		checkRevisions(t, s, map[string]int64{"a": 0, "running": 0})

		edit := *a
		edit.Title += " (edited)"
		if err := s.UpdateSale(ctx, &edit, 0, change(flashsale.ChangeEdit, "title", time.Minute)); err != nil {
			t.Fatalf("UpdateSale: %v", err)
		}
		if _, err := s.AdjustStock(ctx, "running", flashsale.StockDelta{Date: running.Nights[1].Date, Delta: 2},
			change(flashsale.ChangeStock, "+2", time.Minute)); err != nil {
			t.Fatalf("AdjustStock: %v", err)
		}
		checkRevisions(t, s, map[string]int64{"a": 1, "running": 1})

		// Every revision is the one Sales reads in full.
		sales, err := s.Sales(ctx, now)
		if err != nil {
			t.Fatalf("Sales: %v", err)
		}
		want := make(map[string]int64, len(sales))
		for _, sale := range sales {
			want[sale.ID] = sale.Revision
		}
		checkRevisions(t, s, want)
	})
	t.Run("Empty", func(t *testing.T) {
		checkRevisions(t, open(t), nil)
	})
}

func checkRevisions(tb testing.TB, s flashsale.Store, want map[string]int64) {
	tb.Helper()
	got, err := s.Revisions(tb.Context(), now)
	if err != nil {
		tb.Fatalf("Revisions: %v", err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		tb.Errorf("Revisions mismatch (-want +got):\n%s", diff)
	}
}

// testNightStocksOf: the phantom watch reads every live sale's counters in
// one call and compares them with the engine's, so each sale's must be
// NightStocks's, whatever else is asked with it (unknown sales, repeats,
// more sales than one query takes).
func testNightStocksOf(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		s1 := mustCreateSale(t, s, newSale("s1", 2, 5, 0, 7))
		s2 := mustCreateSale(t, s, newSale("s2", 2, 3))
		mustCreateSale(t, s, newSale("s3", 2, 4)) // not asked
		placeWant(t, s, []error{nil, nil, nil},
			res("o1", "s1", "u1", "", 2, 1, 2), res("o2", "s1", "u2", "", 0, 1, 1), res("o3", "s2", "u1", "", 0, 1, 2))
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay")

		// More IDs than one IN list of any store takes, the sales among
		// unknown ones at either end and in the middle, one twice.
		ids := []string{"s1"}
		for i := range 1200 {
			ids = append(ids, fmt.Sprintf("unknown-%04d", i))
			if i == 600 {
				ids = append(ids, "s2")
			}
		}
		ids = append(ids, "s1")
		got, err := s.NightStocksOf(ctx, ids)
		if err != nil {
			t.Fatalf("NightStocksOf: %v", err)
		}
		want := map[string][]flashsale.NightStock{
			"s1": nightStocks(s1, hs{held: 1}, hs{}, hs{sold: 2}),
			"s2": nightStocks(s2, hs{held: 2}),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("NightStocksOf mismatch (-want +got):\n%s", diff)
		}
		for id, nights := range got {
			one, err := s.NightStocks(ctx, id)
			if err != nil {
				t.Fatalf("NightStocks(%s): %v", id, err)
			}
			if diff := cmp.Diff(one, nights); diff != "" {
				t.Errorf("NightStocksOf(%s) is not NightStocks (-NightStocks +NightStocksOf):\n%s", id, diff)
			}
		}
	})
	t.Run("None", func(t *testing.T) {
		// Nothing to ask costs nothing: answered even with a context that
		// would fail any I/O.
		s := open(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, ids := range [][]string{nil, {}} {
			if got, err := s.NightStocksOf(ctx, ids); err != nil || len(got) != 0 {
				t.Fatalf("NightStocksOf(%q) = %v, %v, want none and no I/O", ids, got, err)
			}
		}
	})
}
