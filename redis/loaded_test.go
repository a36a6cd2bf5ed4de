package redis

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestMissingMirrorsAvailable: Missing makes read.lua's checks, so a sale
// is missing exactly when Available answers ErrNotLoaded, whatever befell
// it, and a stale one is unloaded for every reader as Available unloads
// it. Each case corrupts two sales alike and asks one of each.
func TestMissingMirrorsAvailable(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	for _, tc := range []struct {
		name  string
		harm  func(ctx context.Context, k *saleKeys) error
		stale bool
	}{
		{"Loaded", func(context.Context, *saleKeys) error { return nil }, false},
		{"Unloaded", func(ctx context.Context, k *saleKeys) error { return e.client.Del(ctx, k.meta).Err() }, false},
		{"Stamp", func(ctx context.Context, k *saleKeys) error {
			return e.client.HSet(ctx, k.meta, "node", "0123456789abcdef0123456789abcdef01234567").Err()
		}, true},
		{"LostStock", func(ctx context.Context, k *saleKeys) error { return e.client.Del(ctx, k.stock).Err() }, true},
		{"LostRes", func(ctx context.Context, k *saleKeys) error { return e.client.Del(ctx, k.res).Err() }, true},
		// read.lua does not look at these (the scripts that use them do).
		{"LostUsers", func(ctx context.Context, k *saleKeys) error { return e.client.Del(ctx, k.users).Err() }, false},
		{"LostKeys", func(ctx context.Context, k *saleKeys) error { return e.client.Del(ctx, k.keys).Err() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var ids [2]string
			for i := range ids {
				snap := newSale(5, 10)
				mustLoad(t, e, snap)
				r := newReservation(snap, "a", 0, 1, 1)
				r.IdempotencyKey = "k"
				mustReserve(t, e, r)
				if err := tc.harm(ctx, e.saleKeys(snap.Sale.ID)); err != nil {
					t.Fatal(err)
				}
				ids[i] = snap.Sale.ID
			}
			_, avail := e.Available(ctx, ids[0])
			if avail != nil && !errors.Is(avail, flashsale.ErrNotLoaded) {
				t.Fatalf("Available = %v", avail)
			}
			missing, err := e.Missing(ctx, ids[1:])
			if err != nil {
				t.Fatalf("Missing = %v", err)
			}
			if got, want := len(missing) == 1, avail != nil; got != want {
				t.Fatalf("Missing = %q; Available answered %v", missing, avail)
			}
			if want := tc.stale || tc.name == "Unloaded"; (avail != nil) != want {
				t.Fatalf("Available = %v; want not loaded: %v", avail, want)
			}
			// And again: a stale sale, unloaded by either, stays missing.
			again, err := e.Missing(ctx, ids[:])
			if err != nil || len(again) != len(missing)*2 {
				t.Fatalf("Missing of both afterwards = %q, %v", again, err)
			}
			for _, id := range ids {
				n, err := e.client.Exists(ctx, e.saleKeys(id).meta).Result()
				if err != nil {
					t.Fatal(err)
				}
				if tc.stale && n != 0 {
					t.Fatalf("sale %s is stale and still loaded: other readers would sell from it", id)
				}
			}
		})
	}
}

// TestMissingNoScript: a Redis that never ran loaded.lua (a fresh one, or
// one restarted: scripts are not persisted) answers the pipeline NOSCRIPT,
// and Missing sends the source instead; the next call finds it cached.
func TestMissingNoScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis")
	}
	srv := testenv.StartRedis(t)
	e := MustOpenEngine(t, srv.URL(), newPrefix())
	ctx := t.Context()
	snap := newSale(1, 3)
	mustLoad(t, e, snap)
	unknown := "sale-unknown"
	for _, when := range []string{"first", "cached"} {
		if when == "cached" {
			if ok, err := loadedScript.Exists(ctx, e.client).Result(); err != nil || !slices.Equal(ok, []bool{true}) {
				t.Fatalf("loaded.lua in the script cache: %v, %v", ok, err)
			}
		}
		missing, err := e.Missing(ctx, []string{snap.Sale.ID, unknown})
		if err != nil || !slices.Equal(missing, []string{unknown}) {
			t.Fatalf("Missing (%s call) = %q, %v; want the unknown sale", when, missing, err)
		}
	}
}
