package stocktest

import (
	"context"
	"errors"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// unloader is an engine that can lose a loaded sale on purpose (the Redis
// engine's Unload, which the fenced rebuild uses): where the engine under
// test has it, Missing must see the sale go.
type unloader interface {
	Unload(ctx context.Context, saleID string) error
}

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
	t.Run("Unloaded", func(t *testing.T) {
		e := newEngine(t)
		u, ok := e.StockKeeper.(unloader)
		if !ok {
			t.Skip("the engine cannot lose a sale on purpose")
		}
		ctx := t.Context()
		kept, lost := newSnapshot(1, 3), newSnapshot(1, 3)
		mustLoad(t, e, kept, before(kept))
		mustLoad(t, e, lost, before(lost))
		if err := u.Unload(ctx, lost.Sale.ID); err != nil {
			t.Fatalf("Unload: %v", err)
		}
		ids := []string{kept.Sale.ID, lost.Sale.ID}
		checkMissing(t, e, ids, []string{lost.Sale.ID})
		// Loaded again (the rebuild), it is there again.
		mustLoad(t, e, lost, before(lost))
		checkMissing(t, e, ids, nil)
	})
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
