package stocktest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testMissing checks the heal loop's one question, asked of every live
// sale at once: which has the engine not got? A wrapper that dropped the
// answer, or an engine that gave a different one from Available's
// ErrNotLoaded, would leave a lost sale unhealed or rebuild a loaded one.
func testMissing(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("Empty", func(t *testing.T) {
		// Nothing to ask costs nothing: answered even with a context
		// that would fail any I/O.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e := newEngine(t)
		for _, ids := range [][]string{nil, {}} {
			if got, err := e.Missing(ctx, ids); err != nil || len(got) != 0 {
				t.Fatalf("Missing(%q) = %q, %v, want none and no I/O", ids, got, err)
			}
		}
	})
	t.Run("LoadedAndUnknown", func(t *testing.T) {
		e := newEngine(t)
		var loaded, unknown []string
		for range 12 { // on a Cluster, sales on every master
			snap := newSnapshot(1, 2, 2)
			mustLoad(t, e, snap, before(snap))
			loaded = append(loaded, snap.Sale.ID)
			unknown = append(unknown, newID("sale"))
		}
		// Interleaved, with repeats: each missing sale once, in the order
		// of its first appearance.
		var ids []string
		for i := range loaded {
			ids = append(ids, unknown[i], loaded[i])
		}
		ids = append(ids, unknown[0], loaded[0], unknown[3])
		checkMissing(t, e, ids, unknown)
		checkMissing(t, e, loaded, nil)
		checkMissing(t, e, unknown[2:3], unknown[2:3])
	})
	t.Run("Forgotten", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		kept, lost := newSnapshot(1, 3), newSnapshot(1, 3)
		mustLoad(t, e, kept, before(kept))
		mustLoad(t, e, lost, before(lost))
		if err := e.Forget(ctx, lost.Sale.ID); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		ids := []string{kept.Sale.ID, lost.Sale.ID}
		checkMissing(t, e, ids, []string{lost.Sale.ID})
		// Loaded again (the rebuild), it is there again.
		mustLoad(t, e, lost, before(lost))
		checkMissing(t, e, ids, nil)
	})
}

// testForget: a sale over for good is dropped, reservations and all, and
// every call about it answers ErrNotLoaded (a late payment's Retake
// included); another sale is untouched, and forgetting an unknown sale or
// the same one twice does nothing. An engine that kept a forgotten sale
// would keep every order of history in memory (issue 26).
func testForget(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	e := newEngine(t)
	ctx := t.Context()
	over, live := newSnapshot(2, 3, 3), newSnapshot(2, 3)
	mustLoad(t, e, over, before(over))
	mustLoad(t, e, live, before(live))
	kept := mustReserve(t, e, newReservation(live, "guest", 0, 1, 1, "k"))
	mustReserve(t, e, newReservation(over, "guest", 0, 2, 1, "k"))
	released := mustReserve(t, e, newReservation(over, "other", 0, 1, 2, ""))
	if err := e.Release(ctx, over.Sale.ID, released.OrderID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.Forget(ctx, over.Sale.ID); err != nil {
			t.Fatalf("Forget: %v", err)
		}
	}
	if err := e.Forget(ctx, newID("sale")); err != nil {
		t.Fatalf("Forget of an unknown sale: %v", err)
	}
	if _, err := e.Available(ctx, over.Sale.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Available of a forgotten sale: %v, want ErrNotLoaded", err)
	}
	if _, err := e.Reserve(ctx, newReservation(over, "late", 0, 1, 1, "")); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Reserve on a forgotten sale: %v, want ErrNotLoaded", err)
	}
	if err := e.Retake(ctx, over.Sale.ID, released.OrderID); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Retake (a late payment) on a forgotten sale: %v, want ErrNotLoaded", err)
	}
	if _, err := e.Snapshot(ctx, over.Sale.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Snapshot of a forgotten sale: %v, want ErrNotLoaded", err)
	}
	if a, err := e.Available(ctx, live.Sale.ID); err != nil || a[0] != 2 {
		t.Fatalf("the other sale after a Forget: %v, %v; want 2 left", a, err)
	}
	if r, err := e.Reservation(ctx, kept.OrderID); err != nil || !r.Active {
		t.Fatalf("the other sale's reservation after a Forget: %+v, %v", r, err)
	}
}

// checkMissing checks Missing(ids) against want, and against what
// Available answers for each sale.
func checkMissing(tb testing.TB, e flashsale.StockEngine, ids, want []string) {
	tb.Helper()
	ctx := tb.Context()
	got, err := e.Missing(ctx, ids)
	if err != nil {
		tb.Fatalf("Missing: %v", err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		tb.Fatalf("Missing mismatch (-want +got):\n%s", diff)
	}
	gone := map[string]bool{}
	for _, id := range got {
		gone[id] = true
	}
	for _, id := range ids {
		_, err := e.Available(ctx, id)
		if notLoaded := errors.Is(err, flashsale.ErrNotLoaded); notLoaded != gone[id] {
			tb.Fatalf("sale %s: Missing says missing=%v, Available answers %v", id, gone[id], err)
		}
	}
}

// testAvailableOf checks the phantom watch's one read, asked of every live
// sale at once: each loaded sale's units, as Available answers them,
// whatever else is asked with it; a sale not loaded (never, or forgotten)
// absent. A wrapper that dropped a sale, or an engine that answered other
// figures than Available's, would hide a phantom room or invent one.
func testAvailableOf(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("Empty", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		e := newEngine(t)
		for _, ids := range [][]string{nil, {}} {
			if got, err := e.AvailableOf(ctx, ids); err != nil || len(got) != 0 {
				t.Fatalf("AvailableOf(%q) = %v, %v, want none and no I/O", ids, got, err)
			}
		}
	})
	t.Run("LoadedAndUnknown", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		want := map[string][]int{}
		var ids []string
		for i := range 150 { // on a Redis, more than one script call's run; on a Cluster, every master
			snap := newSnapshot(3, 4, 5, 6)
			mustLoad(t, e, snap, before(snap))
			mustReserve(t, e, newReservation(snap, "guest", i%3, 1, 1+i%2, ""))
			units, err := e.Available(ctx, snap.Sale.ID)
			if err != nil {
				t.Fatalf("Available: %v", err)
			}
			want[snap.Sale.ID] = units
			ids = append(ids, newID("sale"), snap.Sale.ID)
		}
		forgotten := newSnapshot(1, 2)
		mustLoad(t, e, forgotten, before(forgotten))
		if err := e.Forget(ctx, forgotten.Sale.ID); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		ids = append(ids, forgotten.Sale.ID, ids[1], ids[0])
		got, err := e.AvailableOf(ctx, ids)
		if err != nil {
			t.Fatalf("AvailableOf: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("AvailableOf mismatch (-Available +AvailableOf):\n%s", diff)
		}
	})
}

// testRetain checks Retain, an operator's later end mid-sale: the sale
// stays loaded with its units, bindings and records, and selling goes on;
// an unknown sale is ErrNotLoaded. (What it extends, where records expire
// on their own, is the engine's own test: redis's TestRetain.)
func testRetain(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	e := newEngine(t)
	ctx := t.Context()
	snap := newSnapshot(2, 3, 3)
	mustLoad(t, e, snap, before(snap))
	first := mustReserve(t, e, newReservation(snap, "guest", 0, 1, 1, "k"))
	later := *snap.Sale
	later.EndsAt = later.EndsAt.Add(5 * 24 * time.Hour)
	for range 2 { // a second Retain, and one that moves nothing, change nothing
		if err := e.Retain(ctx, &later); err != nil {
			t.Fatalf("Retain: %v", err)
		}
	}
	if err := e.Retain(ctx, snap.Sale); err != nil {
		t.Fatalf("Retain of the earlier end: %v", err)
	}
	if got, err := e.Available(ctx, snap.Sale.ID); err != nil || !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("Available after Retain = %v, %v; want [2 3]", got, err)
	}
	if existing, err := e.Reserve(ctx, newReservation(snap, "guest", 0, 1, 1, "k")); !errors.Is(err, flashsale.ErrDuplicate) || existing != first.OrderID {
		t.Fatalf("the key's retry after Retain = %q, %v; want ErrDuplicate and %s", existing, err, first.OrderID)
	}
	mustReserve(t, e, newReservation(snap, "other", 1, 1, 1, ""))
	unknown := *snap.Sale
	unknown.ID = newID("sale")
	if err := e.Retain(ctx, &unknown); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("Retain of an unknown sale: %v, want ErrNotLoaded", err)
	}
}
