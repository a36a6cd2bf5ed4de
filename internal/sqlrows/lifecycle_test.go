package sqlrows

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

func TestPageLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, flashsale.PageDefault}, {-1, flashsale.PageDefault}, {1, 1}, {flashsale.PageDefault + 1, flashsale.PageDefault + 1},
		{flashsale.PageMax, flashsale.PageMax}, {flashsale.PageMax + 1, flashsale.PageMax}, {1 << 40, flashsale.PageMax},
	} {
		if got := PageLimit(tc.in); got != tc.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestFilter pins the conditions and the placeholders of both styles; the
// conformance suite checks what the engines make of them.
func TestFilter(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000).UTC()
	ms := now.UnixMilli()
	for _, tc := range []struct {
		name     string
		q        flashsale.SaleQuery
		numbered bool
		where    string
		args     []any
	}{
		{"All", flashsale.SaleQuery{Now: now}, false, "", nil},
		{"Upcoming", flashsale.SaleQuery{Status: flashsale.SaleUpcoming, Now: now}, false,
			"WHERE starts_at_ms > ? AND ends_at_ms > ?", []any{ms, ms}},
		{"SoldOutIsRunning", flashsale.SaleQuery{Status: flashsale.SaleSoldOut, Now: now}, true,
			"WHERE starts_at_ms <= $1 AND ends_at_ms > $2 AND NOT paused", []any{ms, ms}},
		{"PausedHotelBefore", flashsale.SaleQuery{Status: flashsale.SalePaused, Hotel: "H1", Before: "S9", Now: now}, true,
			"WHERE starts_at_ms <= $1 AND ends_at_ms > $2 AND paused AND hotel = $3 AND id < $4", []any{ms, ms, "H1", "S9"}},
		{"Ended", flashsale.SaleQuery{Status: flashsale.SaleEnded, Before: "S9", Now: now}, false,
			"WHERE ends_at_ms <= ? AND id < ?", []any{ms, "S9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFilter(tc.numbered)
			if err := f.Sales(tc.q); err != nil {
				t.Fatal(err)
			}
			if got := f.Where(); got != tc.where {
				t.Errorf("Where() = %q, want %q", got, tc.where)
			}
			if diff := cmp.Diff(tc.args, f.Args); diff != "" {
				t.Errorf("Args mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("Orders", func(t *testing.T) {
		f := NewFilter(true)
		if err := f.Orders("s1", flashsale.OrderQuery{Status: flashsale.OrderPaid, Before: "O9"}); err != nil {
			t.Fatal(err)
		}
		if got, want := f.Where()+" LIMIT "+f.Arg(10), "WHERE o.sale_id = $1 AND o.status = $2 AND o.id < $3 LIMIT $4"; got != want {
			t.Errorf("Where() = %q, want %q", got, want)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, st := range []flashsale.SaleStatus{"bogus", "Active", "held"} {
			if err := NewFilter(false).Sales(flashsale.SaleQuery{Status: st}); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("Sales(status %q) = %v, want an %s error", st, err, flashsale.EInvalid)
			}
		}
		for _, st := range []flashsale.OrderStatus{"bogus", "Paid", "active"} {
			if err := NewFilter(false).Orders("s1", flashsale.OrderQuery{Status: st}); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("Orders(status %q) = %v, want an %s error", st, err, flashsale.EInvalid)
			}
		}
	})
}

// TestNightsChanged: a unit's time or minutes is as much the unit as its
// date and stock; stay rules are no change of the units.
func TestNightsChanged(t *testing.T) {
	base := []flashsale.Night{{Date: "2030-01-01", Time: "19:00", Stock: 40}, {Date: "2030-01-01", Time: "21:30", Minutes: 60, Stock: 40}}
	edit := func(f func(ns []flashsale.Night) []flashsale.Night) []flashsale.Night {
		return f(append([]flashsale.Night(nil), base...))
	}
	for _, tc := range []struct {
		name string
		want []flashsale.Night
		diff bool
	}{
		{"Same", edit(func(ns []flashsale.Night) []flashsale.Night { return ns }), false},
		{"StayRules", edit(func(ns []flashsale.Night) []flashsale.Night { ns[0].StopSell = true; return ns }), false},
		{"Time", edit(func(ns []flashsale.Night) []flashsale.Night { ns[0].Time = "19:30"; return ns }), true},
		{"Minutes", edit(func(ns []flashsale.Night) []flashsale.Night { ns[1].Minutes = 90; return ns }), true},
		{"Stock", edit(func(ns []flashsale.Night) []flashsale.Night { ns[1].Stock = 39; return ns }), true},
		{"Date", edit(func(ns []flashsale.Night) []flashsale.Night { ns[1].Date = "2030-01-02"; return ns }), true},
		{"Fewer", base[:1], true},
	} {
		if got := nightsChanged(base, tc.want); got != tc.diff {
			t.Errorf("%s: nightsChanged = %v, want %v", tc.name, got, tc.diff)
		}
	}
}
