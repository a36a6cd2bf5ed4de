package redis

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	goredis "github.com/redis/go-redis/v9"
)

// TestMissingMirrorsAvailable: Missing and AvailableOf make read.lua's
// checks, so a sale is missing (absent from AvailableOf) exactly when
// Available answers ErrNotLoaded, whatever befell it, and a stale one is
// unloaded for every reader as Available unloads it. Each case corrupts
// three sales alike and asks one of each; Missing and AvailableOf ask it
// between healthy sales, in one script call (loaded.lua checks a run of
// sales, asking INFO once), and those stay loaded.
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
			load := func(harm bool) string {
				snap := newSale(5, 10)
				mustLoad(t, e, snap)
				r := newReservation(snap, "a", 0, 1, 1)
				r.IdempotencyKey = "k"
				mustReserve(t, e, r)
				if harm {
					if err := tc.harm(ctx, e.saleKeys(snap.Sale.ID)); err != nil {
						t.Fatal(err)
					}
				}
				return snap.Sale.ID
			}
			var ids [3]string
			for i := range ids {
				ids[i] = load(true)
			}
			healthy := []string{load(false), load(false)}
			_, avail := e.Available(ctx, ids[0])
			if avail != nil && !errors.Is(avail, flashsale.ErrNotLoaded) {
				t.Fatalf("Available = %v", avail)
			}
			if want := tc.stale || tc.name == "Unloaded"; (avail != nil) != want {
				t.Fatalf("Available = %v; want not loaded: %v", avail, want)
			}
			missing, err := e.Missing(ctx, []string{healthy[0], ids[1], healthy[1]})
			if err != nil {
				t.Fatalf("Missing = %v", err)
			}
			if got, want := len(missing) == 1 && missing[0] == ids[1], avail != nil; got != want || len(missing) > 1 {
				t.Fatalf("Missing = %q; Available answered %v", missing, avail)
			}
			units, err := e.AvailableOf(ctx, []string{healthy[0], ids[2], healthy[1]})
			if err != nil {
				t.Fatalf("AvailableOf = %v", err)
			}
			if _, got := units[ids[2]]; got != (avail == nil) {
				t.Fatalf("AvailableOf = %v; Available answered %v", units, avail)
			}
			for _, id := range healthy {
				if got := units[id]; len(got) != 1 || got[0] != 9 {
					t.Fatalf("AvailableOf of a healthy sale in the same call = %v, want [9]", got)
				}
			}
			if u, ok := units[ids[2]]; ok && (len(u) != 1 || u[0] != 9) {
				t.Fatalf("AvailableOf = %v, want [9]", u)
			}
			// And again: a stale sale, unloaded by any, stays missing.
			again, err := e.Missing(ctx, append(ids[:], healthy...))
			if err != nil || len(again) != len(missing)*3 {
				t.Fatalf("Missing of all afterwards = %q, %v", again, err)
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
			for _, id := range healthy {
				if _, err := e.Available(ctx, id); err != nil {
					t.Fatalf("a healthy sale checked beside a harmed one: %v", err)
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

// TestMissingRuns: on a single node Missing and AvailableOf check a run of
// loadedRun sales per script call, so the heal loop's tick costs Redis a
// call per hundred live sales, not one per sale (issue 26).
func TestMissingRuns(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	if _, cluster := e.client.(*goredis.ClusterClient); cluster {
		t.Skip("a Cluster runs one sale per call")
	}
	ctx := t.Context()
	var ids []string
	for range 2*loadedRun + 1 {
		snap := newSale(1, 2)
		mustLoad(t, e, snap)
		ids = append(ids, snap.Sale.ID)
	}
	var calls counter
	e.client.AddHook(&calls)
	if missing, err := e.Missing(ctx, ids); err != nil || len(missing) != 0 {
		t.Fatalf("Missing = %q, %v", missing, err)
	}
	if got := calls.n.Swap(0); got != 3 {
		t.Fatalf("Missing of %d sales made %d script calls, want 3", len(ids), got)
	}
	if units, err := e.AvailableOf(ctx, ids); err != nil || len(units) != len(ids) {
		t.Fatalf("AvailableOf = %d sales, %v", len(units), err)
	}
	if got := calls.n.Load(); got != 3 {
		t.Fatalf("AvailableOf of %d sales made %d script calls, want 3", len(ids), got)
	}
}

// counter counts the commands sent in pipelines.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next goredis.DialHook) goredis.DialHook          { return next }
func (c *counter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (c *counter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
