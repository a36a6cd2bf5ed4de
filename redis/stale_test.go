package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestStaleAfterRestart: a Redis killed and started again from what it had
// persisted (a snapshot taken before the last reservations, or an AOF) is
// not empty but may be behind. Its sales are stale: every read and every
// script answers ErrNotLoaded (and unloads the sale), so the funnel
// rebuilds them behind the fence instead of selling the rooms again.
// Before the stamp, the snapshot case read the two rooms taken after the
// SAVE as available and sold them again.
func TestStaleAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		after func(t *testing.T, e *Engine) // between the last reserve and the kill
	}{
		{"Snapshot", nil, nil},
		{"AOF", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			rs := testenv.StartRedis(t, tc.args...)
			e := openOwn(t, rs.URL())
			snap := newSale(5, 10)
			mustLoad(t, e, snap)
			mustReserve(t, e, newReservation(snap, "a", 0, 1, 1))
			if tc.args == nil {
				if err := e.client.Save(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			mustReserve(t, e, newReservation(snap, "b", 0, 1, 1))
			mustReserve(t, e, newReservation(snap, "c", 0, 1, 1))
			if tc.args != nil {
				time.Sleep(1100 * time.Millisecond) // past everysec's fsync: the AOF has every write
			}
			rs.Kill()
			rs.Start()

			waitAnswers(t, e)
			if got, err := e.Available(ctx, snap.Sale.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
				t.Fatalf("Available after a restart from %s = %v, %v; want ErrNotLoaded", tc.name, got, err)
			}
			if _, err := e.Reserve(ctx, newReservation(snap, "d", 0, 1, 1)); !errors.Is(err, flashsale.ErrNotLoaded) {
				t.Fatalf("Reserve after a restart from %s = %v; want ErrNotLoaded", tc.name, err)
			}
			// The rebuild's load (started sale, zero time) stamps it again.
			if err := e.Load(ctx, snap, time.Time{}); err != nil {
				t.Fatal(err)
			}
			mustReserve(t, e, newReservation(snap, "d", 0, 1, 1))
			if got, err := e.Available(ctx, snap.Sale.ID); err != nil || got[0] != 9 {
				t.Fatalf("Available after the rebuild = %v, %v; want [9]", got, err)
			}
		})
	}
}

// TestStaleStamp: every operation on a sale checks the stamp, and the first
// to find it foreign unloads the sale for every other. The stamp is forged
// here as a restored snapshot or a promoted replica would carry it.
func TestStaleStamp(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	for _, tc := range []struct {
		name string
		op   func(ctx context.Context, snap *flashsale.StockSnapshot, r *flashsale.Reservation) error
	}{
		{"Reserve", func(ctx context.Context, snap *flashsale.StockSnapshot, _ *flashsale.Reservation) error {
			_, err := e.Reserve(ctx, newReservation(snap, "x", 0, 1, 1))
			return err
		}},
		{"Release", func(ctx context.Context, snap *flashsale.StockSnapshot, r *flashsale.Reservation) error {
			return e.Release(ctx, snap.Sale.ID, r.OrderID)
		}},
		{"Retake", func(ctx context.Context, snap *flashsale.StockSnapshot, r *flashsale.Reservation) error {
			return e.Retake(ctx, snap.Sale.ID, r.OrderID)
		}},
		{"AdjustStock", func(ctx context.Context, snap *flashsale.StockSnapshot, _ *flashsale.Reservation) error {
			return e.AdjustStock(ctx, snap.Sale.ID, 0, 1)
		}},
		{"Available", func(ctx context.Context, snap *flashsale.StockSnapshot, _ *flashsale.Reservation) error {
			_, err := e.Available(ctx, snap.Sale.ID)
			return err
		}},
		{"Snapshot", func(ctx context.Context, snap *flashsale.StockSnapshot, _ *flashsale.Reservation) error {
			_, err := e.Snapshot(ctx, snap.Sale.ID)
			return err
		}},
		{"Load", func(ctx context.Context, snap *flashsale.StockSnapshot, _ *flashsale.Reservation) error {
			// A start-up load of a started sale keeps a loaded one
			// (ErrAlreadyStarted) but replaces a stale one.
			if err := e.Load(ctx, snap, time.Now()); err != nil {
				return err
			}
			return errors.New("loaded")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			snap := newSale(5, 10)
			mustLoad(t, e, snap)
			r := newReservation(snap, "a", 0, 1, 1)
			mustReserve(t, e, r)
			meta := e.saleKeys(snap.Sale.ID).meta
			if err := e.client.HSet(ctx, meta, "node", "0123456789abcdef0123456789abcdef01234567").Err(); err != nil {
				t.Fatal(err)
			}
			err := tc.op(ctx, snap, r)
			if tc.name == "Load" {
				if err == nil || err.Error() != "loaded" {
					t.Fatalf("Load over a stale started sale = %v; want it replaced", err)
				}
				return
			}
			if !errors.Is(err, flashsale.ErrNotLoaded) {
				t.Fatalf("%s on a stale sale = %v; want ErrNotLoaded", tc.name, err)
			}
			if n, err := e.client.Exists(ctx, meta).Result(); err != nil || n != 0 {
				t.Fatalf("the stale sale's meta is still there (%d, %v): other readers would sell from it", n, err)
			}
		})
	}
}

func openOwn(t *testing.T, url string) *Engine {
	t.Helper()
	e, err := Open(t.Context(), url, Options{Prefix: newPrefix(), Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// waitAnswers waits until a restarted Redis has loaded its data.
func waitAnswers(t *testing.T, e *Engine) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := e.client.Ping(t.Context()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis does not answer after its restart: %v", err)
		}
	}
}

// TestEvictionWarning: a Redis that may evict keys is named at Open (the
// stale check cannot see a key evicted alone), one that may not is not.
func TestEvictionWarning(t *testing.T) {
	for _, tc := range []struct {
		policy string
		warns  bool
	}{{"noeviction", false}, {"volatile-lru", true}, {"allkeys-lru", true}} {
		t.Run(tc.policy, func(t *testing.T) {
			rs := testenv.StartRedis(t, "--maxmemory-policy", tc.policy)
			var logs bytes.Buffer
			e, err := Open(t.Context(), rs.URL(), Options{Prefix: newPrefix()}, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			e.Close()
			got := strings.Contains(logs.String(), "maxmemory_policy="+tc.policy)
			if got != tc.warns {
				t.Fatalf("warned %v, want %v:\n%s", got, tc.warns, logs.String())
			}
		})
	}
}

// TestLostHash: a sale whose hash lost its contents alone (evicted,
// deleted, expired apart from its meta) is stale, not empty: the next
// script unloads it, so the heal rebuilds it from the database. Before the
// sentinel, losing the idempotency hash let a retry with the same key take
// a second room under a new order (issue 21, item 4), losing the users
// hash lifted the per-user limit, losing the stock hash read as sold out.
func TestLostHash(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	for _, lost := range []string{"stock", "users", "keys", "res"} {
		t.Run(lost, func(t *testing.T) {
			ctx := t.Context()
			snap := newSale(2, 10) // a limit of 2: the keys case would take a second room
			mustLoad(t, e, snap)
			first := newReservation(snap, "guest", 0, 1, 1)
			first.IdempotencyKey = "k1"
			mustReserve(t, e, first)
			k := e.saleKeys(snap.Sale.ID)
			key := map[string]string{"stock": k.stock, "users": k.users, "keys": k.keys, "res": k.res}[lost]
			if err := e.client.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			retry := newReservation(snap, "guest", 0, 1, 1)
			retry.IdempotencyKey = "k1"
			existing, err := e.Reserve(ctx, retry)
			if !errors.Is(err, flashsale.ErrNotLoaded) {
				t.Fatalf("the same key's retry after the %s hash was lost = %q, %v; want ErrNotLoaded (a rebuild), not a second order", lost, existing, err)
			}
			if n, err := e.client.Exists(ctx, k.meta).Result(); err != nil || n != 0 {
				t.Fatalf("the sale is still loaded (%d, %v): other instances would sell from it", n, err)
			}
			// The rebuild's load puts the sentinels back: it sells again.
			if err := e.Load(ctx, snap, time.Time{}); err != nil {
				t.Fatal(err)
			}
			mustReserve(t, e, newReservation(snap, "other", 0, 1, 1))
			got, err := e.Snapshot(ctx, snap.Sale.ID)
			if err != nil || got.Nights[0].Available != 9 || len(got.Reservations) != 1 {
				t.Fatalf("Snapshot after the rebuild = %+v, %v; want 9 left and one reservation (no sentinel read as one)", got, err)
			}
		})
	}
}
