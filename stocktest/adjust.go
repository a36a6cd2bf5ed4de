package stocktest

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
)

// testAdjustStock checks AdjustStock: rooms added are buyable at once (and
// clear a sold-out flag), rooms taken away come only from the available
// ones, and under a storm of reserves and adjustments the books balance.
func testAdjustStock(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("AddAndRemove", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(5, 2, 3)
		mustLoad(t, e, snap, before(snap))
		mustAdjust(t, e, snap, 0, 3)
		checkAvailable(t, e, snap, 5, 3)
		mustAdjust(t, e, snap, 1, -3)
		checkAvailable(t, e, snap, 5, 0)
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 4, ""))
		checkAvailable(t, e, snap, 1, 0)
		if err := e.AdjustStock(ctx, snap.Sale.ID, 0, -2); !errors.Is(err, flashsale.ErrStockInUse) {
			t.Fatalf("AdjustStock(take 2 of 1 available) = %v, want ErrStockInUse", err)
		}
		checkAvailable(t, e, snap, 1, 0)
		mustAdjust(t, e, snap, 0, -1)
		checkAvailable(t, e, snap, 0, 0)
	})
	t.Run("Errors", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 2)
		mustLoad(t, e, snap, before(snap))
		for _, night := range []int{-1, 1, 400} {
			if err := e.AdjustStock(ctx, snap.Sale.ID, night, 1); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("AdjustStock(night %d of 1) = %v, want EInvalid", night, err)
			}
		}
		if err := e.AdjustStock(ctx, newID("sale"), 0, 1); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Errorf("AdjustStock(unknown sale) = %v, want ErrNotLoaded", err)
		}
		checkAvailable(t, e, snap, 2)
	})
	t.Run("ClearsSoldOut", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(2, 1)
		mustLoad(t, e, snap, before(snap))
		id := snap.Sale.ID
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		waitFor(t, "SoldOut after the last room went", func() bool { return e.SoldOut(id, 0, 1) })
		mustAdjust(t, e, snap, 0, 2)
		// This engine added the rooms, so its own next Reserve sees them
		// at once: no wait for a broadcast.
		if e.SoldOut(id, 0, 1) {
			t.Fatal("SoldOut right after rooms were added")
		}
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 2, ""))
		waitFor(t, "SoldOut after the added rooms went", func() bool { return e.SoldOut(id, 0, 1) })
		mustAdjust(t, e, snap, 0, 1)
		mustAdjust(t, e, snap, 0, -1)
		waitFor(t, "SoldOut after the room was taken back", func() bool { return e.SoldOut(id, 0, 1) })
	})
	t.Run("Storm", func(t *testing.T) {
		// 600 guests buy one room each while operators add 60 rooms one
		// at a time and take rooms back one at a time: the engine never
		// hands out a room it does not have, takes back only free ones,
		// and what is taken equals what the reservations hold.
		e := newEngine(t)
		ctx := t.Context()
		const initial, added, guests, removers = 100, 60, 600, 200
		snap := newSnapshot(1, initial)
		mustLoad(t, e, snap, before(snap))
		rs := make([]*flashsale.Reservation, guests)
		for i := range rs {
			rs[i] = newReservation(snap, newID("user"), 0, 1, 1, "")
		}
		results := make([]result, guests)
		var removed atomic.Int64
		parallel(guests+added+removers, func(i int) {
			switch {
			case i < guests:
				existing, err := e.Reserve(ctx, rs[i])
				results[i] = result{existing, err}
			case i < guests+added:
				if err := e.AdjustStock(ctx, snap.Sale.ID, 0, 1); err != nil {
					t.Errorf("AdjustStock(+1): %v", err)
				}
			default:
				switch err := e.AdjustStock(ctx, snap.Sale.ID, 0, -1); {
				case err == nil:
					removed.Add(1)
				case !errors.Is(err, flashsale.ErrStockInUse):
					t.Errorf("AdjustStock(-1): %v", err)
				}
			}
		})
		var active []*flashsale.Reservation
		for i, res := range results {
			switch {
			case res.err == nil:
				active = append(active, rs[i])
			case !errors.Is(res.err, flashsale.ErrSoldOut):
				t.Fatalf("Reserve: %v", res.err)
			}
		}
		// checkBooks proves the conservation: stock (initial + added -
		// removed) - available = the rooms the reservations hold.
		checkBooks(t, e, snap, []int{initial + added - int(removed.Load())}, active, 1)
	})
}

func mustAdjust(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, night, delta int) {
	tb.Helper()
	if err := e.AdjustStock(tb.Context(), snap.Sale.ID, night, delta); err != nil {
		tb.Fatalf("AdjustStock(night %d, %+d): %v", night, delta, err)
	}
}
