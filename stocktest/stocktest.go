// Package stocktest is the conformance suite every flashsale.StockEngine
// must pass: the in-process engine and the Redis engine (single node and
// Cluster) run the same tests, so the funnel can rely on one contract.
//
// Engines may share a server across tests, so every test uses fresh random
// sale IDs, order IDs, user IDs and idempotency keys and never assumes an
// empty engine. The storms are the point of the suite: they check the
// invariants on counts (never oversell, exact per-user limit, conservation
// of units across release and retake), not just the error codes.
package stocktest

import (
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/google/go-cmp/cmp"
)

// Run runs the whole suite. newEngine returns an engine to test; it may
// return the same engine (or engines sharing a server) on every call, since
// every test works on sales of its own.
func Run(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("Load", func(t *testing.T) { testLoad(t, newEngine) })
	t.Run("Reserve", func(t *testing.T) { testReserve(t, newEngine) })
	t.Run("Release", func(t *testing.T) { testRelease(t, newEngine) })
	t.Run("Retake", func(t *testing.T) { testRetake(t, newEngine) })
	t.Run("Lookup", func(t *testing.T) { testLookup(t, newEngine) })
	t.Run("ReserveSpending", func(t *testing.T) { testReserveSpending(t, newEngine) })
	t.Run("Capabilities", func(t *testing.T) { testCapabilities(t, newEngine) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, newEngine) })
	t.Run("AvailableOf", func(t *testing.T) { testAvailableOf(t, newEngine) })
	t.Run("Forget", func(t *testing.T) { testForget(t, newEngine) })
	t.Run("Retain", func(t *testing.T) { testRetain(t, newEngine) })
	t.Run("AdjustStock", func(t *testing.T) { testAdjustStock(t, newEngine) })
	t.Run("Storm", func(t *testing.T) { testStorm(t, newEngine) })
	t.Run("StayRules", func(t *testing.T) { testStayRules(t, newEngine) })
	t.Run("Slots", func(t *testing.T) { testSlots(t, newEngine) })
	t.Run("Choices", func(t *testing.T) { testChoices(t, newEngine) })
	t.Run("ShuttleStorm", func(t *testing.T) { testShuttleStorm(t, newEngine) })
}

// testCapabilities checks what the funnel relies on beyond the atomic
// steps, so a wrapper (breaker, metrics) that forgot to forward one fails
// here rather than in production: the sold-out fast path, the readiness
// ping and, where the engine has one, the outbox.
func testCapabilities(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("Ping", func(t *testing.T) {
		if err := newEngine(t).Ping(t.Context()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
	t.Run("Shard", func(t *testing.T) {
		// A sale's shard names where its calls fail; a wrapper that lost it
		// ("" from an engine of several) would let one dead part refuse all.
		e := newEngine(t)
		snap := newSnapshot(1, 1)
		mustLoad(t, e, snap, before(snap))
		first := e.Shard(snap.Sale.ID)
		if again := e.Shard(snap.Sale.ID); again != first {
			t.Fatalf("Shard of one sale: %q, then %q", first, again)
		}
	})
	t.Run("SoldOut", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(1, 1)
		mustLoad(t, e, snap, before(snap))
		id := snap.Sale.ID
		if e.SoldOut(id, 0, 1) {
			t.Fatal("SoldOut before any reservation")
		}
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		// An engine that learns of a sell-out by a broadcast may take a moment.
		waitFor(t, "SoldOut after the last room went", func() bool { return e.SoldOut(id, 0, 1) })
		mustRelease(t, e, snap, r.OrderID)
		waitFor(t, "not SoldOut after the room came back", func() bool { return !e.SoldOut(id, 0, 1) })
		if e.SoldOut(newID("sale"), 0, 1) {
			t.Error("SoldOut of an unknown sale: only a certain sell-out may skip the engine")
		}
	})
	t.Run("Snapshot", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(2, 3, 3)
		mustLoad(t, e, snap, before(snap))
		kept := mustReserve(t, e, newReservation(snap, newID("user"), 0, 2, 1, "key-1"))
		gone := mustReserve(t, e, newReservation(snap, newID("user"), 1, 1, 2, ""))
		mustRelease(t, e, snap, gone.OrderID)
		got, err := e.Snapshot(t.Context(), snap.Sale.ID)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if avail := []int{got.Nights[0].Available, got.Nights[1].Available}; len(got.Nights) != 2 || avail[0] != 2 || avail[1] != 2 {
			t.Errorf("Snapshot nights = %+v, want 2 and 2 available", got.Nights)
		}
		want := map[string]flashsale.Reservation{kept.OrderID: *kept, gone.OrderID: *gone}
		k, g := want[kept.OrderID], want[gone.OrderID]
		k.Active, g.Active = true, false
		want[kept.OrderID], want[gone.OrderID] = k, g
		have := map[string]flashsale.Reservation{}
		for _, r := range got.Reservations {
			have[r.OrderID] = r
		}
		if diff := cmp.Diff(want, have); diff != "" {
			t.Errorf("Snapshot reservations mismatch (-want +got):\n%s", diff)
		}
		if _, err := e.Snapshot(t.Context(), newID("sale")); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Errorf("Snapshot of an unknown sale = %v, want ErrNotLoaded", err)
		}
	})
	t.Run("Outbox", func(t *testing.T) {
		e := newEngine(t)
		ob := e.Outbox
		if ob == nil {
			t.Skip("the engine keeps no outbox")
		}
		snap := newSnapshot(5, 5)
		mustLoad(t, e, snap, before(snap))
		confirmed := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		released := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		waiting := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		unconfirmed := func() map[string]bool {
			rs, err := ob.Unconfirmed(t.Context(), time.Now().Add(time.Minute), 1<<20)
			if err != nil {
				t.Fatalf("Unconfirmed: %v", err)
			}
			ids := map[string]bool{}
			for _, r := range rs {
				ids[r.OrderID] = true
			}
			return ids
		}
		if u := unconfirmed(); !u[confirmed.OrderID] || !u[released.OrderID] || !u[waiting.OrderID] {
			t.Fatalf("a fresh reservation is not unconfirmed: %v", u)
		}
		if err := ob.Confirm(t.Context(), snap.Sale.ID, confirmed.OrderID); err != nil {
			t.Fatalf("Confirm: %v", err)
		}
		mustRelease(t, e, snap, released.OrderID)
		waitFor(t, "confirmed and released orders leave the outbox", func() bool {
			u := unconfirmed()
			return !u[confirmed.OrderID] && !u[released.OrderID] && u[waiting.OrderID]
		})
		// A retry retakes a released reservation and publishes it again: if
		// that publish's outcome is lost, the relay must find it.
		if err := e.Retake(t.Context(), snap.Sale.ID, released.OrderID); err != nil {
			t.Fatalf("Retake: %v", err)
		}
		if u := unconfirmed(); !u[released.OrderID] {
			t.Fatalf("a reservation retaken from released is not back in the outbox: %v", u)
		}
	})
}

// waitFor polls cond until it holds, failing the test after five seconds.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLoad(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("OK", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(1, 10, 10, 10)
		// The database already holds some units: Available, not Stock, is
		// what the engine installs.
		snap.Nights[0].Available, snap.Nights[1].Available, snap.Nights[2].Available = 7, 0, 10
		mustLoad(t, e, snap, before(snap))
		checkAvailable(t, e, snap, 7, 0, 10)
	})

	t.Run("Reservations", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(2, 10, 10)
		snap.Nights[0].Available, snap.Nights[1].Available = 6, 8
		held := newReservation(snap, newID("user"), 0, 2, 2, newID("key")) // active, at the limit
		held.Active = true
		expired := newReservation(snap, newID("user"), 0, 1, 2, newID("key")) // inactive: binds its key only
		paid := newReservation(snap, newID("user"), 0, 1, 1, "")              // active, no key
		paid.Active = true
		snap.Reservations = []flashsale.Reservation{*held, *expired, *paid}
		mustLoad(t, e, snap, before(snap))
		checkAvailable(t, e, snap, 6, 8)

		// Keys are bound, for active and inactive orders alike.
		checkLookup(t, e, snap, held.UserID, held.IdempotencyKey, held.OrderID)
		checkLookup(t, e, snap, expired.UserID, expired.IdempotencyKey, expired.OrderID)
		checkReserveDuplicate(t, e, newReservation(snap, held.UserID, 1, 1, 1, held.IdempotencyKey), held.OrderID)
		checkReserveDuplicate(t, e, newReservation(snap, expired.UserID, 1, 1, 1, expired.IdempotencyKey), expired.OrderID)

		// Active reservations count against the limit, inactive ones do not.
		checkReserveErr(t, e, newReservation(snap, held.UserID, 1, 1, 1, ""), flashsale.ErrLimitExceeded)
		checkReserveErr(t, e, newReservation(snap, paid.UserID, 1, 1, 2, ""), flashsale.ErrLimitExceeded)
		mustReserve(t, e, newReservation(snap, paid.UserID, 1, 1, 1, ""))
		mustReserve(t, e, newReservation(snap, expired.UserID, 1, 1, 2, ""))
		checkAvailable(t, e, snap, 6, 5)

		// The engine knows the loaded reservations well enough to release them.
		checkReservation(t, e, held, true)
		checkReservation(t, e, expired, false)
		mustRelease(t, e, snap, held.OrderID)
		checkAvailable(t, e, snap, 8, 7)
		mustReserve(t, e, newReservation(snap, held.UserID, 0, 1, 2, ""))
		checkAvailable(t, e, snap, 6, 7)
		if err := e.Release(ctx, snap.Sale.ID, expired.OrderID); err != nil {
			t.Fatalf("Release(inactive): %v", err)
		}
		checkAvailable(t, e, snap, 6, 7)
	})

	t.Run("ErrAlreadyStarted", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, newID("key")))

		for _, now := range []time.Time{snap.Sale.StartsAt, snap.Sale.StartsAt.Add(time.Minute)} {
			again := newSnapshot(1, 50)
			again.Sale = snap.Sale
			if err := e.Load(ctx, again, now); !errors.Is(err, flashsale.ErrAlreadyStarted) {
				t.Fatalf("Load(started at %v) = %v, want ErrAlreadyStarted", now.Sub(snap.Sale.StartsAt), err)
			}
			// Nothing changed: stock, key, limit and reservation stand.
			checkAvailable(t, e, snap, 4)
			checkLookup(t, e, snap, r.UserID, r.IdempotencyKey, r.OrderID)
			checkReserveErr(t, e, newReservation(snap, r.UserID, 0, 1, 1, ""), flashsale.ErrLimitExceeded)
			checkReservation(t, e, r, true)
		}
	})

	t.Run("ReloadBeforeStart", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 2, 1, newID("key")))
		checkAvailable(t, e, snap, 4, 4)

		// A second preheat resets the sale to the new snapshot.
		again := newSnapshot(1, 3, 9)
		again.Sale = snap.Sale
		mustLoad(t, e, again, before(snap))
		checkAvailable(t, e, snap, 3, 9)
		if got, err := e.Lookup(ctx, snap.Sale.ID, r.UserID, r.IdempotencyKey); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Lookup(key of the reset sale) = %q, %v, want ErrNotFound", got, err)
		}
		// The user's limit was reset, and the old order can no longer
		// return units it no longer holds.
		if err := e.Release(ctx, snap.Sale.ID, r.OrderID); err != nil {
			t.Fatalf("Release(order of the reset sale): %v", err)
		}
		checkAvailable(t, e, snap, 3, 9)
		mustReserve(t, e, newReservation(snap, r.UserID, 0, 1, 1, r.IdempotencyKey))
		checkAvailable(t, e, snap, 2, 9)
	})

	t.Run("FirstLoadAfterStart", func(t *testing.T) {
		// Rebuilding a sale that is not loaded (engine restarted mid-sale) is allowed.
		e := newEngine(t)
		snap := newSnapshot(1, 5)
		mustLoad(t, e, snap, snap.Sale.StartsAt.Add(time.Minute))
		checkAvailable(t, e, snap, 5)
	})

	t.Run("ErrNotLoaded", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5)
		if got, err := e.Available(ctx, snap.Sale.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("Available(unknown sale) = %v, %v, want ErrNotLoaded", got, err)
		}
		r := newReservation(snap, newID("user"), 0, 1, 1, newID("key"))
		if _, err := e.Reserve(ctx, r); !errors.Is(err, flashsale.ErrNotLoaded) {
			t.Fatalf("Reserve(unknown sale) = %v, want ErrNotLoaded", err)
		}
		if _, err := e.Reservation(ctx, r.OrderID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Reservation(refused order) = %v, want ErrNotFound", err)
		}
	})
}

func testReserve(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("OK", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(2, 5, 5, 5, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 1, 2, 2, newID("key")))
		checkAvailable(t, e, snap, 5, 3, 3, 5)
		checkReservation(t, e, r, true)
		checkLookup(t, e, snap, r.UserID, r.IdempotencyKey, r.OrderID)
		mustReserve(t, e, newReservation(snap, newID("user"), 3, 1, 1, ""))
		checkAvailable(t, e, snap, 5, 3, 3, 4)
	})

	t.Run("ErrSoldOut", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(5, 3, 1, 3)
		mustLoad(t, e, snap, before(snap))

		// One night short refuses the whole stay and deducts nothing.
		r := newReservation(snap, newID("user"), 0, 3, 2, newID("key"))
		checkReserveErr(t, e, r, flashsale.ErrSoldOut)
		checkAvailable(t, e, snap, 3, 1, 3)
		if _, err := e.Reservation(ctx, r.OrderID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Reservation(sold out order) = %v, want ErrNotFound", err)
		}
		if got, err := e.Lookup(ctx, snap.Sale.ID, r.UserID, r.IdempotencyKey); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Lookup(key of a sold out attempt) = %q, %v, want ErrNotFound", got, err)
		}
		// The refused attempt took none of the user's limit, nor the key.
		r2 := newReservation(snap, r.UserID, 0, 3, 1, r.IdempotencyKey)
		mustReserve(t, e, r2)
		checkAvailable(t, e, snap, 2, 0, 2)
		checkReserveErr(t, e, newReservation(snap, newID("user"), 1, 1, 1, ""), flashsale.ErrSoldOut)
		checkReserveErr(t, e, newReservation(snap, newID("user"), 0, 2, 1, ""), flashsale.ErrSoldOut)
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 2, ""))
		checkReserveErr(t, e, newReservation(snap, newID("user"), 2, 1, 3, ""), flashsale.ErrSoldOut)
		mustReserve(t, e, newReservation(snap, newID("user"), 2, 1, 2, ""))
		checkAvailable(t, e, snap, 0, 0, 0)
		for i := range 3 {
			checkReserveErr(t, e, newReservation(snap, newID("user"), i, 1, 1, ""), flashsale.ErrSoldOut)
		}
		checkAvailable(t, e, snap, 0, 0, 0)
	})

	t.Run("ErrLimitExceeded", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(3, 20, 20, 20)
		mustLoad(t, e, snap, before(snap))
		user := newID("user")
		// The limit counts rooms, not room-nights, summed over the user's reservations.
		mustReserve(t, e, newReservation(snap, user, 0, 3, 2, ""))
		checkReserveErr(t, e, newReservation(snap, user, 0, 1, 2, newID("key")), flashsale.ErrLimitExceeded)
		checkAvailable(t, e, snap, 18, 18, 18)
		mustReserve(t, e, newReservation(snap, user, 2, 1, 1, ""))
		checkReserveErr(t, e, newReservation(snap, user, 1, 1, 1, ""), flashsale.ErrLimitExceeded)
		checkAvailable(t, e, snap, 18, 18, 17)
		// One request above the limit is refused outright; other users are unaffected.
		checkReserveErr(t, e, newReservation(snap, newID("user"), 0, 1, 4, ""), flashsale.ErrLimitExceeded)
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 3, ""))
		checkAvailable(t, e, snap, 15, 18, 17)
		// The limit is per sale.
		other := newSnapshot(3, 5)
		mustLoad(t, e, other, before(other))
		mustReserve(t, e, newReservation(other, user, 0, 1, 3, ""))
	})

	t.Run("ErrDuplicate", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(2, 10)
		mustLoad(t, e, snap, before(snap))
		user, key := newID("user"), newID("key")
		r := mustReserve(t, e, newReservation(snap, user, 0, 1, 1, key))

		dup := newReservation(snap, user, 0, 1, 1, key)
		checkReserveDuplicate(t, e, dup, r.OrderID)
		checkAvailable(t, e, snap, 9)
		if _, err := e.Reservation(ctx, dup.OrderID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("Reservation(duplicate attempt) = %v, want ErrNotFound", err)
		}
		// The key is scoped to the user and the sale.
		mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, key))
		other := newSnapshot(2, 10)
		mustLoad(t, e, other, before(other))
		mustReserve(t, e, newReservation(other, user, 0, 1, 1, key))
		// An empty key means no idempotency.
		u2 := newID("user")
		mustReserve(t, e, newReservation(snap, u2, 0, 1, 1, ""))
		mustReserve(t, e, newReservation(snap, u2, 0, 1, 1, ""))
		checkAvailable(t, e, snap, 6)

		// A released order keeps its key.
		mustRelease(t, e, snap, r.OrderID)
		checkReserveDuplicate(t, e, newReservation(snap, user, 0, 1, 1, key), r.OrderID)
		checkLookup(t, e, snap, user, key, r.OrderID)
		checkAvailable(t, e, snap, 7)
	})

	t.Run("DuplicateBeforeLimitAndStock", func(t *testing.T) {
		// A client retrying with its key gets its order back, even though
		// the sale is now sold out and the user at the limit.
		e := newEngine(t)
		snap := newSnapshot(1, 1)
		mustLoad(t, e, snap, before(snap))
		user, key := newID("user"), newID("key")
		r := mustReserve(t, e, newReservation(snap, user, 0, 1, 1, key))
		checkAvailable(t, e, snap, 0)
		checkReserveDuplicate(t, e, newReservation(snap, user, 0, 1, 1, key), r.OrderID)
		checkAvailable(t, e, snap, 0)
	})

	t.Run("InvalidStay", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(5, 5, 5)
		mustLoad(t, e, snap, before(snap))
		for _, tt := range []struct{ first, nights, rooms int }{
			{-1, 1, 1}, {0, 0, 1}, {0, 3, 1}, {2, 1, 1}, {1, 2, 1}, {0, 1, 0}, {0, 1, -1}, {0, -1, 1},
		} {
			r := newReservation(snap, newID("user"), tt.first, tt.nights, tt.rooms, "")
			if _, err := e.Reserve(ctx, r); err == nil {
				t.Errorf("Reserve(first=%d nights=%d rooms=%d) succeeded, want an error", tt.first, tt.nights, tt.rooms)
			}
		}
		checkAvailable(t, e, snap, 5, 5)
	})

	t.Run("SalesAreIndependent", func(t *testing.T) {
		e := newEngine(t)
		a, b := newSnapshot(1, 1), newSnapshot(1, 1)
		mustLoad(t, e, a, before(a))
		mustLoad(t, e, b, before(b))
		mustReserve(t, e, newReservation(a, newID("user"), 0, 1, 1, ""))
		checkAvailable(t, e, a, 0)
		checkAvailable(t, e, b, 1)
	})
}

// testReserveSpending: a token buys at most one reservation, however many
// requests race with it, and stays spent until it expires.
func testReserveSpending(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	later := func() time.Time { return time.Now().Add(time.Minute) }

	t.Run("Once", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1000, 1000)
		mustLoad(t, e, snap, before(snap))
		token, exp := newID("token"), later()
		var (
			mu   sync.Mutex
			won  int
			errs = map[error]int{}
		)
		parallel(64, func(int) {
			_, err := e.ReserveSpending(ctx, newReservation(snap, newID("user"), 0, 1, 1, ""), token, exp)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won++
			} else {
				errs[err]++
			}
		})
		if won != 1 || errs[flashsale.ErrTokenInvalid] != 63 {
			t.Fatalf("64 racing reserves with one token: %d accepted, errors %v; want 1 and 63 ErrTokenInvalid", won, errs)
		}
		checkAvailable(t, e, snap, 999)
	})

	t.Run("SpentWhenRefused", func(t *testing.T) {
		// A refusal other than sold out still spends the token: it cannot
		// be tried again once the guest is under the limit.
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 10)
		mustLoad(t, e, snap, before(snap))
		user, token, exp := newID("user"), newID("token"), later()
		if _, err := e.ReserveSpending(ctx, newReservation(snap, user, 0, 1, 2, ""), token, exp); !errors.Is(err, flashsale.ErrLimitExceeded) {
			t.Fatalf("ReserveSpending over the limit = %v, want ErrLimitExceeded", err)
		}
		if _, err := e.ReserveSpending(ctx, newReservation(snap, user, 0, 1, 1, ""), token, exp); !errors.Is(err, flashsale.ErrTokenInvalid) {
			t.Fatalf("ReserveSpending with the spent token = %v, want ErrTokenInvalid", err)
		}
		checkAvailable(t, e, snap, 10)
	})

	t.Run("RetryGetsItsOrder", func(t *testing.T) {
		// The idempotency key is checked before the token: a retry carrying
		// the token its first attempt spent gets that order back.
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 1)
		mustLoad(t, e, snap, before(snap))
		user, key, token, exp := newID("user"), newID("key"), newID("token"), later()
		first := newReservation(snap, user, 0, 1, 1, key)
		if _, err := e.ReserveSpending(ctx, first, token, exp); err != nil {
			t.Fatalf("ReserveSpending: %v", err)
		}
		got, err := e.ReserveSpending(ctx, newReservation(snap, user, 0, 1, 1, key), token, exp)
		if !errors.Is(err, flashsale.ErrDuplicate) || got != first.OrderID {
			t.Fatalf("retry = %q, %v, want %q, ErrDuplicate", got, err, first.OrderID)
		}
		checkAvailable(t, e, snap, 0)
	})

	t.Run("ForgottenAfterExpiry", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(10, 10)
		mustLoad(t, e, snap, before(snap))
		token := newID("token")
		if _, err := e.ReserveSpending(ctx, newReservation(snap, newID("user"), 0, 1, 1, ""), token, time.Now().Add(50*time.Millisecond)); err != nil {
			t.Fatalf("ReserveSpending: %v", err)
		}
		// The mark lasts as long as the token could be presented, no longer.
		deadline := time.Now().Add(3 * time.Second)
		for {
			_, err := e.ReserveSpending(ctx, newReservation(snap, newID("user"), 0, 1, 1, ""), token, later())
			if err == nil {
				break
			}
			if !errors.Is(err, flashsale.ErrTokenInvalid) || time.Now().After(deadline) {
				t.Fatalf("ReserveSpending after the token expired = %v, want success within 3 s", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func testRelease(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("OK", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(2, 5, 5, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 1, 2, 2, newID("key")))
		checkAvailable(t, e, snap, 5, 3, 3)
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 5, 5, 5)
		checkReservation(t, e, r, false)
		checkLookup(t, e, snap, r.UserID, r.IdempotencyKey, r.OrderID)
		// The user's limit is free again.
		mustReserve(t, e, newReservation(snap, r.UserID, 0, 1, 2, ""))
		checkAvailable(t, e, snap, 3, 5, 5)
	})

	t.Run("Idempotent", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 2, 1, ""))
		mustRelease(t, e, snap, r.OrderID)
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 5, 5)
		// Releasing an order the engine never saw does nothing either.
		_ = e.Release(ctx, snap.Sale.ID, newID("order"))
		checkAvailable(t, e, snap, 5, 5)
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Many releases of the same orders at once return each order's units once.
		e := newEngine(t)
		snap := newSnapshot(1, 20)
		mustLoad(t, e, snap, before(snap))
		var orders []*flashsale.Reservation
		for range 10 {
			orders = append(orders, mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, "")))
		}
		checkAvailable(t, e, snap, 10)
		parallel(len(orders)*8, func(i int) {
			if err := e.Release(t.Context(), snap.Sale.ID, orders[i%len(orders)].OrderID); err != nil {
				t.Errorf("Release: %v", err)
			}
		})
		checkAvailable(t, e, snap, 20)
	})
}

func testRetake(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("OK", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(2, 5, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 2, 2, newID("key")))
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 5, 5)
		mustRetake(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 3, 3)
		checkReservation(t, e, r, true)
		checkLookup(t, e, snap, r.UserID, r.IdempotencyKey, r.OrderID)
		// The retaken rooms count against the limit again.
		checkReserveErr(t, e, newReservation(snap, r.UserID, 0, 1, 1, ""), flashsale.ErrLimitExceeded)
		// And can be released again.
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 5, 5)
	})

	t.Run("ErrSoldOut", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		// Two rooms a night, so the first reserve leaves no night at zero:
		// an engine that learns of a zero by a broadcast may hear it after
		// its own release, and its late flag would answer the next reserve
		// sold out (CI saw it).
		snap := newSnapshot(1, 3, 2)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 2, 1, ""))
		mustRelease(t, e, snap, r.OrderID)
		// Others buy the second night while the order is released.
		mustReserve(t, e, newReservation(snap, newID("user"), 1, 1, 1, ""))
		mustReserve(t, e, newReservation(snap, newID("user"), 1, 1, 1, ""))
		checkAvailable(t, e, snap, 3, 0)
		if err := e.Retake(ctx, snap.Sale.ID, r.OrderID); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatalf("Retake = %v, want ErrSoldOut", err)
		}
		checkAvailable(t, e, snap, 3, 0)
		checkReservation(t, e, r, false)
		// The failed retake took none of the user's limit.
		mustReserve(t, e, newReservation(snap, r.UserID, 0, 1, 1, ""))
		checkAvailable(t, e, snap, 2, 0)
	})

	t.Run("ErrLimitExceeded", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		mustRelease(t, e, snap, r.OrderID)
		mustReserve(t, e, newReservation(snap, r.UserID, 0, 1, 1, ""))
		checkAvailable(t, e, snap, 4)
		if err := e.Retake(ctx, snap.Sale.ID, r.OrderID); !errors.Is(err, flashsale.ErrLimitExceeded) {
			t.Fatalf("Retake = %v, want ErrLimitExceeded", err)
		}
		checkAvailable(t, e, snap, 4)
		checkReservation(t, e, r, false)
	})

	t.Run("Active", func(t *testing.T) {
		// Retaking an order that is still active takes nothing more.
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(3, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		_ = e.Retake(ctx, snap.Sale.ID, r.OrderID)
		_ = e.Retake(ctx, snap.Sale.ID, r.OrderID)
		checkAvailable(t, e, snap, 4)
		checkReservation(t, e, r, true)
		mustReserve(t, e, newReservation(snap, r.UserID, 0, 1, 2, ""))
		checkAvailable(t, e, snap, 2)
	})

	t.Run("PinsActive", func(t *testing.T) {
		// A payment retakes an expired hold whose release has not reached
		// the engine yet: the late Release keeps the units (and unpins);
		// only a Release after that frees them.
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 1)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""))
		mustRetake(t, e, snap, r.OrderID)
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 0)
		checkReservation(t, e, r, true)
		checkReserveErr(t, e, newReservation(snap, newID("user"), 0, 1, 1, ""), flashsale.ErrSoldOut)
		mustRelease(t, e, snap, r.OrderID)
		checkAvailable(t, e, snap, 1)
		checkReservation(t, e, r, false)
		if err := e.Retake(ctx, snap.Sale.ID, r.OrderID); err != nil {
			t.Fatalf("Retake of the released order: %v", err)
		}
		checkAvailable(t, e, snap, 0)
		mustRelease(t, e, snap, r.OrderID) // retaken from released: not pinned
		checkAvailable(t, e, snap, 1)
	})

	t.Run("Unknown", func(t *testing.T) {
		e := newEngine(t)
		snap := newSnapshot(1, 5)
		mustLoad(t, e, snap, before(snap))
		if err := e.Retake(t.Context(), snap.Sale.ID, newID("order")); err == nil {
			t.Fatal("Retake(unknown order) succeeded, want an error")
		}
		checkAvailable(t, e, snap, 5)
	})
}

func testLookup(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("ErrNotFound", func(t *testing.T) {
		e := newEngine(t)
		ctx := t.Context()
		snap := newSnapshot(1, 5)
		mustLoad(t, e, snap, before(snap))
		r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 1, newID("key")))
		for _, tt := range []struct{ user, key string }{
			{r.UserID, newID("key")}, {newID("user"), r.IdempotencyKey},
		} {
			if got, err := e.Lookup(ctx, snap.Sale.ID, tt.user, tt.key); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("Lookup(%s, %s) = %q, %v, want ErrNotFound", tt.user, tt.key, got, err)
			}
		}
		if _, err := e.Reservation(ctx, newID("order")); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Reservation(unknown order) = %v, want ErrNotFound", err)
		}
	})
}

func testStorm(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("SingleNight", func(t *testing.T) { testStormSingleNight(t, newEngine(t)) })
	t.Run("MultiNight", func(t *testing.T) { testStormMultiNight(t, newEngine(t)) })
	t.Run("ReleaseRetake", func(t *testing.T) { testStormReleaseRetake(t, newEngine(t)) })
}

// testStormSingleNight is the flash sale itself: 10 000 attempts from 2 000
// users at once on 100 rooms, limit one per user. Half the users retry with
// the same idempotency key, half without one.
func testStormSingleNight(t *testing.T, e flashsale.StockEngine) {
	const (
		stock    = 100
		users    = 2000
		attempts = 5
	)
	ctx := t.Context()
	snap := newSnapshot(1, stock)
	mustLoad(t, e, snap, before(snap))

	userIDs, keys := make([]string, users), make([]string, users)
	for u := range users {
		userIDs[u] = newID("user")
		if u%2 == 0 {
			keys[u] = newID("key")
		}
	}
	rs := make([]*flashsale.Reservation, users*attempts)
	for i := range rs {
		u := i % users
		rs[i] = newReservation(snap, userIDs[u], 0, 1, 1, keys[u])
	}
	results := reserveAll(t, e, rs)

	okByUser := map[string]string{}
	var ok int
	for i, res := range results {
		r := rs[i]
		switch {
		case res.err == nil:
			ok++
			if prev, dup := okByUser[r.UserID]; dup {
				t.Errorf("user %s got two orders: %s and %s", r.UserID, prev, r.OrderID)
			}
			okByUser[r.UserID] = r.OrderID
		case errors.Is(res.err, flashsale.ErrSoldOut), errors.Is(res.err, flashsale.ErrLimitExceeded):
		case errors.Is(res.err, flashsale.ErrDuplicate) && r.IdempotencyKey != "":
		default:
			t.Fatalf("Reserve(%s) = %q, %v", r.OrderID, res.existing, res.err)
		}
	}
	if ok != stock {
		t.Fatalf("accepted %d reservations, want exactly %d", ok, stock)
	}
	checkAvailable(t, e, snap, 0)
	for i, res := range results {
		if r := rs[i]; errors.Is(res.err, flashsale.ErrDuplicate) && res.existing != okByUser[r.UserID] {
			t.Errorf("Reserve(%s) = ErrDuplicate of %q, want the user's order %q", r.OrderID, res.existing, okByUser[r.UserID])
		}
	}
	checkOrders(t, e, snap, rs, results)
	for u := range users {
		if keys[u] == "" {
			continue
		}
		want, found := okByUser[userIDs[u]]
		got, err := e.Lookup(ctx, snap.Sale.ID, userIDs[u], keys[u])
		switch {
		case found && (err != nil || got != want):
			t.Errorf("Lookup(user %s) = %q, %v, want %q", userIDs[u], got, err, want)
		case !found && !errors.Is(err, flashsale.ErrNotFound):
			t.Errorf("Lookup(user %s without order) = %q, %v, want ErrNotFound", userIDs[u], got, err)
		}
	}
}

// testStormMultiNight sells three nights of different stock to random
// stays at once and checks, night by night, that what was taken is exactly
// what the accepted reservations hold.
func testStormMultiNight(t *testing.T, e flashsale.StockEngine) {
	const (
		users    = 600
		attempts = 3000
		limit    = 3
	)
	stocks := []int{50, 80, 30}
	snap := newSnapshot(limit, stocks...)
	mustLoad(t, e, snap, before(snap))

	userIDs := make([]string, users)
	for u := range userIDs {
		userIDs[u] = newID("user")
	}
	rs := make([]*flashsale.Reservation, attempts)
	for i := range rs {
		first := mrand.IntN(len(stocks))
		nights := 1 + mrand.IntN(len(stocks)-first)
		rs[i] = newReservation(snap, userIDs[i%users], first, nights, 1+mrand.IntN(2), "")
	}
	results := reserveAll(t, e, rs)

	var active []*flashsale.Reservation
	for i, res := range results {
		switch {
		case res.err == nil:
			active = append(active, rs[i])
		case errors.Is(res.err, flashsale.ErrSoldOut), errors.Is(res.err, flashsale.ErrLimitExceeded):
		default:
			t.Fatalf("Reserve(%s) = %q, %v", rs[i].OrderID, res.existing, res.err)
		}
	}
	if len(active) == 0 {
		t.Fatal("no reservation was accepted")
	}
	avail := checkBooks(t, e, snap, stocks, active, limit)
	checkOrders(t, e, snap, rs, results)
	// What Available reports is really there, and no more: each night's
	// remaining units sell to fresh users, then the night is sold out.
	for n, left := range avail {
		for ; left > 0; left -= min(left, limit) {
			mustReserve(t, e, newReservation(snap, newID("user"), n, 1, min(left, limit), ""))
		}
		checkReserveErr(t, e, newReservation(snap, newID("user"), n, 1, 1, ""), flashsale.ErrSoldOut)
	}
	checkAvailable(t, e, snap, 0, 0, 0)
}

// testStormReleaseRetake races releases (twice per order), retakes and new
// reservations, then checks conservation: the units taken are exactly those
// of the reservations the engine reports active, and releasing everything
// returns the stock to where it started.
func testStormReleaseRetake(t *testing.T, e flashsale.StockEngine) {
	const (
		users = 300
		limit = 2
	)
	ctx := t.Context()
	stocks := []int{60, 40}
	snap := newSnapshot(limit, stocks...)
	mustLoad(t, e, snap, before(snap))

	userIDs, keys := make([]string, users), make([]string, users)
	for u := range users {
		userIDs[u] = newID("user")
		keys[u] = newID("key")
	}
	newStay := func(u int, key string) *flashsale.Reservation {
		first := mrand.IntN(len(stocks))
		return newReservation(snap, userIDs[u], first, 1+mrand.IntN(len(stocks)-first), 1+mrand.IntN(limit), key)
	}
	// Phase one: sell out.
	first := make([]*flashsale.Reservation, users)
	for u := range users {
		first[u] = newStay(u, keys[u])
	}
	var orders []*flashsale.Reservation
	keyOrder := map[string]string{}
	for i, res := range reserveAll(t, e, first) {
		switch {
		case res.err == nil:
			orders = append(orders, first[i])
			keyOrder[first[i].IdempotencyKey] = first[i].OrderID
		case errors.Is(res.err, flashsale.ErrSoldOut), errors.Is(res.err, flashsale.ErrLimitExceeded):
		default:
			t.Fatalf("Reserve(%s) = %v", first[i].OrderID, res.err)
		}
	}
	if len(orders) == 0 {
		t.Fatal("no reservation was accepted")
	}

	// Phase two: every order is released twice and retaken once while new
	// attempts (half of them retries of phase one's keys) compete for the units.
	second := make([]*flashsale.Reservation, users)
	for u := range users {
		key := ""
		if u%2 == 0 {
			key = keys[u]
		}
		second[u] = newStay(u, key)
	}
	results := make([]result, users)
	parallel(len(orders)*3+users, func(i int) {
		if i >= len(orders)*3 {
			j := i - len(orders)*3
			existing, err := e.Reserve(ctx, second[j])
			results[j] = result{existing, err}
			return
		}
		r := orders[i/3]
		if i%3 == 2 {
			if err := e.Retake(ctx, snap.Sale.ID, r.OrderID); err != nil &&
				!errors.Is(err, flashsale.ErrSoldOut) && !errors.Is(err, flashsale.ErrLimitExceeded) {
				t.Errorf("Retake(%s) = %v", r.OrderID, err)
			}
			return
		}
		if err := e.Release(ctx, snap.Sale.ID, r.OrderID); err != nil {
			t.Errorf("Release(%s) = %v", r.OrderID, err)
		}
	})
	for j, res := range results {
		r := second[j]
		switch {
		case res.err == nil:
			orders = append(orders, r)
		case errors.Is(res.err, flashsale.ErrSoldOut), errors.Is(res.err, flashsale.ErrLimitExceeded):
		case errors.Is(res.err, flashsale.ErrDuplicate):
			if want, ok := keyOrder[r.IdempotencyKey]; !ok || res.existing != want {
				t.Errorf("Reserve(%s) = ErrDuplicate of %q, want %q", r.OrderID, res.existing, want)
			}
		default:
			t.Fatalf("Reserve(%s) = %v", r.OrderID, res.err)
		}
	}
	if t.Failed() {
		return
	}

	// The engine's own view of which orders are active must balance its stock.
	var active []*flashsale.Reservation
	for _, r := range orders {
		got, err := e.Reservation(ctx, r.OrderID)
		if err != nil {
			t.Fatalf("Reservation(%s): %v", r.OrderID, err)
		}
		if got.Active {
			active = append(active, r)
		}
	}
	checkBooks(t, e, snap, stocks, active, limit)

	// Releasing everything, twice over, returns every unit exactly once.
	parallel(len(orders)*2, func(i int) {
		if err := e.Release(ctx, snap.Sale.ID, orders[i/2].OrderID); err != nil {
			t.Errorf("Release(%s) = %v", orders[i/2].OrderID, err)
		}
	})
	checkAvailable(t, e, snap, stocks...)
	// And every user's limit is free again.
	for u := range 5 {
		mustReserve(t, e, newReservation(snap, userIDs[u], 0, 1, limit, ""))
	}
}

// result is one Reserve answer.
type result struct {
	existing string
	err      error
}

// reserveAll sends every reservation at once, one goroutine each, released
// together so they truly contend.
func reserveAll(t *testing.T, e flashsale.StockEngine, rs []*flashsale.Reservation) []result {
	t.Helper()
	results := make([]result, len(rs))
	parallel(len(rs), func(i int) {
		existing, err := e.Reserve(t.Context(), rs[i])
		results[i] = result{existing, err}
	})
	return results
}

// parallel runs f(0..n-1) in n goroutines that start together, and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// checkBooks checks a sale's stock against the reservations that hold it:
// per night, taken == stock - available == the rooms of the active
// reservations through that night, and available is never negative; per
// user, the active rooms are within the limit. It returns the available units.
func checkBooks(t *testing.T, e flashsale.StockEngine, snap *flashsale.StockSnapshot, stocks []int, active []*flashsale.Reservation, limit int) []int {
	t.Helper()
	avail, err := e.Available(t.Context(), snap.Sale.ID)
	if err != nil {
		t.Fatalf("Available: %v", err)
	}
	if len(avail) != len(stocks) {
		t.Fatalf("Available = %v, want %d nights", avail, len(stocks))
	}
	held := make([]int, len(stocks))
	perUser := map[string]int{}
	for _, r := range active {
		for n := r.FirstNight; n < r.FirstNight+r.Nights; n++ {
			held[n] += r.Rooms
		}
		perUser[r.UserID] += r.Rooms
	}
	for n := range stocks {
		if avail[n] < 0 || avail[n] > stocks[n] {
			t.Errorf("night %d: available %d outside [0, %d]", n, avail[n], stocks[n])
		}
		if taken := stocks[n] - avail[n]; taken != held[n] {
			t.Errorf("night %d: taken %d (stock %d - available %d), but active reservations hold %d",
				n, taken, stocks[n], avail[n], held[n])
		}
	}
	for u, rooms := range perUser {
		if rooms > limit {
			t.Errorf("user %s holds %d rooms, limit %d", u, rooms, limit)
		}
	}
	return avail
}

// checkOrders checks that every accepted reservation is recorded as given
// and active, and that a sample of refused ones left no trace.
func checkOrders(t *testing.T, e flashsale.StockEngine, snap *flashsale.StockSnapshot, rs []*flashsale.Reservation, results []result) {
	t.Helper()
	refused := 0
	for i, res := range results {
		if res.err == nil {
			checkReservation(t, e, rs[i], true)
			continue
		}
		if refused++; refused > 200 {
			continue
		}
		if got, err := e.Reservation(t.Context(), rs[i].OrderID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Reservation(refused %s) = %+v, %v, want ErrNotFound", rs[i].OrderID, got, err)
		}
	}
}

// newID returns a fresh random identifier with a readable prefix.
func newID(prefix string) string { return prefix + "-" + rand.Text() }

// newSnapshot returns the snapshot of a fresh sale, starting in an hour,
// with one night per stock figure, all stock available and no reservations.
func newSnapshot(limit int, stocks ...int) *flashsale.StockSnapshot {
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	s := fixture.Sale(fixture.ID(newID("sale")), fixture.Stock(stocks...), fixture.Price(100_00, 400_00),
		fixture.Window(start, start.Add(time.Hour)), fixture.Limit(limit))
	snap := &flashsale.StockSnapshot{Sale: s}
	for _, n := range s.Nights {
		snap.Nights = append(snap.Nights, flashsale.NightStock{Date: n.Date, Stock: n.Stock, Available: n.Stock})
	}
	return snap
}

// newReservation returns a reservation with a fresh order ID. It is not
// active: the engine marks it so when it accepts it.
func newReservation(snap *flashsale.StockSnapshot, userID string, first, nights, rooms int, key string) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: newID("order"), SaleID: snap.Sale.ID, UserID: userID, IdempotencyKey: key,
		FirstNight: first, Nights: nights, Rooms: rooms,
		Amount:        snap.Sale.Price * int64(rooms) * int64(max(nights, 0)),
		HoldExpiresAt: time.Unix(time.Now().Unix()+30, 0).UTC(),
	}
}

// before returns a moment before the snapshot's sale starts (preheat time).
func before(snap *flashsale.StockSnapshot) time.Time { return snap.Sale.StartsAt.Add(-time.Minute) }

func mustLoad(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, now time.Time) {
	tb.Helper()
	if err := e.Load(tb.Context(), snap, now); err != nil {
		tb.Fatalf("Load(%s): %v", snap.Sale.ID, err)
	}
}

func mustReserve(tb testing.TB, e flashsale.StockEngine, r *flashsale.Reservation) *flashsale.Reservation {
	tb.Helper()
	if existing, err := e.Reserve(tb.Context(), r); err != nil || existing != "" {
		tb.Fatalf("Reserve(first=%d nights=%d rooms=%d) = %q, %v, want success", r.FirstNight, r.Nights, r.Rooms, existing, err)
	}
	return r
}

func mustRelease(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, orderID string) {
	tb.Helper()
	if err := e.Release(tb.Context(), snap.Sale.ID, orderID); err != nil {
		tb.Fatalf("Release(%s): %v", orderID, err)
	}
}

func mustRetake(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, orderID string) {
	tb.Helper()
	if err := e.Retake(tb.Context(), snap.Sale.ID, orderID); err != nil {
		tb.Fatalf("Retake(%s): %v", orderID, err)
	}
}

func checkReserveErr(tb testing.TB, e flashsale.StockEngine, r *flashsale.Reservation, want error) {
	tb.Helper()
	if existing, err := e.Reserve(tb.Context(), r); !errors.Is(err, want) || existing != "" {
		tb.Fatalf("Reserve(first=%d nights=%d rooms=%d) = %q, %v, want %v", r.FirstNight, r.Nights, r.Rooms, existing, err, want)
	}
}

func checkReserveDuplicate(tb testing.TB, e flashsale.StockEngine, r *flashsale.Reservation, want string) {
	tb.Helper()
	if existing, err := e.Reserve(tb.Context(), r); !errors.Is(err, flashsale.ErrDuplicate) || existing != want {
		tb.Fatalf("Reserve(duplicate key) = %q, %v, want %q, ErrDuplicate", existing, err, want)
	}
}

func checkAvailable(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, want ...int) {
	tb.Helper()
	got, err := e.Available(tb.Context(), snap.Sale.ID)
	if err != nil {
		tb.Fatalf("Available(%s): %v", snap.Sale.ID, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Fatalf("Available mismatch (-want +got):\n%s", diff)
	}
}

func checkLookup(tb testing.TB, e flashsale.StockEngine, snap *flashsale.StockSnapshot, userID, key, want string) {
	tb.Helper()
	if got, err := e.Lookup(tb.Context(), snap.Sale.ID, userID, key); err != nil || got != want {
		tb.Fatalf("Lookup(%s, %s) = %q, %v, want %q", userID, key, got, err, want)
	}
}

// checkReservation checks that the engine records r as given, with the active flag.
func checkReservation(tb testing.TB, e flashsale.StockEngine, r *flashsale.Reservation, active bool) {
	tb.Helper()
	got, err := e.Reservation(tb.Context(), r.OrderID)
	if err != nil {
		tb.Fatalf("Reservation(%s): %v", r.OrderID, err)
	}
	want := *r
	want.Active = active
	want.Choices = 0 // the request's; the record names the unit taken
	if diff := cmp.Diff(&want, got); diff != "" {
		tb.Errorf("Reservation(%s) mismatch (-want +got):\n%s", r.OrderID, diff)
	}
}
