package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/faultproxy"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/stocktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPrefix returns a key prefix no other test uses.
func newPrefix() string { return "fstest:" + rand.Text()[:10] + ":" }

// MustOpenEngine opens an Engine on url with prefix and deletes every key
// under the prefix when the test ends.
func MustOpenEngine(tb testing.TB, url, prefix string) *Engine {
	tb.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The conformance suites are about answers, not latency: a storm on a
	// loaded machine (CI runs the packages in parallel) can keep a command
	// past the 500 ms production default.
	e, err := Open(context.Background(), url, Options{Prefix: prefix, Timeout: 5 * time.Second}, logger)
	if err != nil {
		tb.Fatalf("Open(%s) = %v", url, err)
	}
	tb.Cleanup(func() {
		deleteKeys(tb, e, prefix)
		if err := e.Close(); err != nil {
			tb.Errorf("Close() = %v", err)
		}
	})
	return e
}

// deleteKeys removes every key under prefix, on every master of a Cluster.
func deleteKeys(tb testing.TB, e *Engine, prefix string) {
	ctx := context.Background()
	del := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	var err error
	switch c := e.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *goredis.Client:
		err = del(ctx, c)
	}
	if err != nil {
		tb.Errorf("delete keys %s*: %v", prefix, err)
	}
}

func redisURL(tb testing.TB) string {
	tb.Helper()
	return testenv.URL(tb, testenv.Redis)
}

func TestStockEngine(t *testing.T) {
	url := redisURL(t)
	stocktest.Run(t, func(tb testing.TB) flashsale.StockEngine {
		return MustOpenEngine(tb, url, newPrefix()).Roles()
	})
}

func TestOpen(t *testing.T) {
	t.Run("BadURL", func(t *testing.T) {
		if _, err := Open(t.Context(), "http://x", Options{}, slog.Default()); err == nil {
			t.Fatal("Open(http://x) succeeded")
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := Open(ctx, "redis://127.0.0.1:1", Options{}, slog.Default())
		if err == nil {
			t.Fatal("Open(port 1) succeeded")
		}
	})
}

// newSale returns a snapshot of a sale that started a minute ago.
func newSale(limit int, stocks ...int) *flashsale.StockSnapshot {
	s := fixture.Sale(fixture.ID("sale-"+rand.Text()[:12]), fixture.Stock(stocks...), fixture.Limit(limit))
	snap := &flashsale.StockSnapshot{Sale: s}
	for _, n := range s.Nights {
		snap.Nights = append(snap.Nights, flashsale.NightStock{Date: n.Date, Stock: n.Stock, Available: n.Stock})
	}
	return snap
}

func mustLoad(tb testing.TB, e *Engine, snap *flashsale.StockSnapshot) {
	tb.Helper()
	if err := e.Load(tb.Context(), snap, snap.Sale.StartsAt.Add(-time.Second)); err != nil {
		tb.Fatalf("Load(%s) = %v", snap.Sale.ID, err)
	}
}

func newReservation(snap *flashsale.StockSnapshot, user string, first, nights, rooms int) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: "order-" + rand.Text()[:12], SaleID: snap.Sale.ID, UserID: user,
		FirstNight: first, Nights: nights, Rooms: rooms, Amount: 100,
		HoldExpiresAt: time.Now().Add(30 * time.Second), Active: true,
	}
}

func mustReserve(tb testing.TB, e *Engine, r *flashsale.Reservation) {
	tb.Helper()
	if existing, err := e.Reserve(tb.Context(), r); err != nil {
		tb.Fatalf("Reserve(%s) = %q, %v", r.OrderID, existing, err)
	}
}

func TestReserve(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	ctx := t.Context()

	t.Run("RecordRoundTrips", func(t *testing.T) {
		snap := newSale(3, 5, 5)
		mustLoad(t, e, snap)
		// A user ID with the separator and a key with NUL and bars must
		// read back byte for byte.
		r := newReservation(snap, "u|1|", 0, 2, 2)
		r.IdempotencyKey = "k|\x00|é"
		r.Amount = 1 << 50
		mustReserve(t, e, r)
		got, err := e.Reservation(ctx, r.OrderID)
		if err != nil {
			t.Fatalf("Reservation() = %v", err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("Reservation() mismatch (-want +got):\n%s", diff)
		}
		if id, err := e.Lookup(ctx, snap.Sale.ID, r.UserID, r.IdempotencyKey); err != nil || id != r.OrderID {
			t.Errorf("Lookup() = %q, %v, want %q", id, err, r.OrderID)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		snap := newSale(3, 5, 5)
		mustLoad(t, e, snap)
		for _, r := range []*flashsale.Reservation{
			newReservation(snap, "u", 1, 2, 1),
			newReservation(snap, "u", -1, 1, 1),
			newReservation(snap, "u", 0, 1, 0),
		} {
			if _, err := e.Reserve(ctx, r); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("Reserve(first=%d nights=%d rooms=%d) = %v, want EInvalid", r.FirstNight, r.Nights, r.Rooms, err)
			}
		}
	})

	t.Run("IndexLost", func(t *testing.T) {
		// A crash between the script and the index write loses only the
		// index: Reservation still finds the order through the sales set.
		snap := newSale(3, 5)
		mustLoad(t, e, snap)
		r := newReservation(snap, "u", 0, 1, 1)
		mustReserve(t, e, r)
		if err := e.client.Del(ctx, e.orderKey(r.OrderID)).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := e.Reservation(ctx, r.OrderID)
		if err != nil {
			t.Fatalf("Reservation(without index) = %v", err)
		}
		if got.SaleID != snap.Sale.ID {
			t.Errorf("Reservation().SaleID = %q, want %q", got.SaleID, snap.Sale.ID)
		}
	})

	t.Run("KeysExpire", func(t *testing.T) {
		snap := newSale(3, 5)
		mustLoad(t, e, snap)
		r := newReservation(snap, "u", 0, 1, 1)
		r.IdempotencyKey = "k"
		mustReserve(t, e, r)
		k := e.saleKeys(snap.Sale.ID)
		for _, key := range append(k.reserve, e.orderKey(r.OrderID)) {
			if ttl := e.client.PTTL(ctx, key).Val(); ttl <= 0 {
				t.Errorf("PTTL(%s) = %v, want an expiry", key, ttl)
			}
		}
		// An engine that never saw the sale's expiry gives the index one
		// a day past the hold.
		other := mustOpenShared(t, e)
		r2 := newReservation(snap, "u2", 0, 1, 1)
		mustReserve(t, other, r2)
		ttl := e.client.PTTL(ctx, e.orderKey(r2.OrderID)).Val()
		if max := time.Until(r2.HoldExpiresAt) + keyTTLSlack; ttl <= keyTTLSlack/2 || ttl > max+time.Second {
			t.Errorf("PTTL(index from a fresh engine) = %v, want about %v", ttl, max)
		}
	})

	t.Run("KeysRetained", func(t *testing.T) {
		// An operator moves a live sale's end five days later: every key
		// of the sale, and its entry in the sales set, then expires a day
		// after the new end's last hold, not the old one's (before Retain
		// they vanished mid-sale and the fence closed it for a rebuild).
		// An earlier end never brings them closer.
		snap := newSale(3, 5)
		mustLoad(t, e, snap)
		r := newReservation(snap, "u", 0, 1, 1)
		r.IdempotencyKey = "k"
		mustReserve(t, e, r) // users, keys, res and unconfirmed exist
		later := *snap.Sale
		later.EndsAt = later.EndsAt.Add(5 * 24 * time.Hour)
		want := time.UnixMilli(expireAt(&later))
		check := func(when string) {
			t.Helper()
			k := e.saleKeys(snap.Sale.ID)
			for _, key := range k.reserve {
				at, err := e.client.PExpireTime(ctx, key).Result()
				if err != nil || time.UnixMilli(int64(at/time.Millisecond)).Sub(want).Abs() > time.Second {
					t.Errorf("%s: PEXPIRETIME(%s) = %v, %v; want %v", when, key, at, err, want)
				}
			}
			if score, err := e.client.ZScore(ctx, e.salesKey(), snap.Sale.ID).Result(); err != nil || int64(score) != want.UnixMilli() {
				t.Errorf("%s: the sales set's expiry of the sale = %v, %v; want %v", when, score, err, want.UnixMilli())
			}
		}
		if err := e.Retain(ctx, &later); err != nil {
			t.Fatalf("Retain: %v", err)
		}
		check("after Retain")
		if err := e.Retain(ctx, snap.Sale); err != nil {
			t.Fatalf("Retain(the old end): %v", err)
		}
		check("after Retain of the old end")
		if got, err := e.Reservation(ctx, r.OrderID); err != nil || got.OrderID != r.OrderID {
			t.Errorf("Reservation after Retain = %v, %v", got, err)
		}
	})

	t.Run("RefusedIndex", func(t *testing.T) {
		// The index is written beside the script whatever it answers. A
		// refused order's entry never makes Reservation find anything,
		// and it is deleted in the background.
		snap := newSale(1, 5)
		mustLoad(t, e, snap)
		mustReserve(t, e, newReservation(snap, "u", 0, 1, 1))
		r := newReservation(snap, "u", 0, 1, 1)
		if _, err := e.Reserve(ctx, r); !errors.Is(err, flashsale.ErrLimitExceeded) {
			t.Fatalf("Reserve(over the limit) = %v, want ErrLimitExceeded", err)
		}
		if _, err := e.Reservation(ctx, r.OrderID); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Reservation(refused) = %v, want ErrNotFound", err)
		}
		checkFor(t, 2*time.Second, "the refused order's index is deleted", func() bool {
			return e.client.Exists(ctx, e.orderKey(r.OrderID)).Val() == 0
		})
	})

	t.Run("IndexStale", func(t *testing.T) {
		// An index naming a sale without the order is only a hint.
		snap, other := newSale(3, 5), newSale(3, 5)
		mustLoad(t, e, snap)
		mustLoad(t, e, other)
		r := newReservation(snap, "u", 0, 1, 1)
		mustReserve(t, e, r)
		if err := e.client.Set(ctx, e.orderKey(r.OrderID), other.Sale.ID, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := e.Reservation(ctx, r.OrderID)
		if err != nil {
			t.Fatalf("Reservation(stale index) = %v", err)
		}
		if got.SaleID != snap.Sale.ID {
			t.Errorf("Reservation(stale index).SaleID = %q, want %q", got.SaleID, snap.Sale.ID)
		}
	})

	t.Run("ErrUnavailable", func(t *testing.T) {
		e := MustOpenEngine(t, redisURL(t), newPrefix())
		snap := newSale(3, 5)
		mustLoad(t, e, snap)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := e.Reserve(ctx, newReservation(snap, "u", 0, 1, 1)); !errors.Is(err, flashsale.ErrUnavailable) {
			t.Errorf("Reserve(cancelled) = %v, want ErrUnavailable", err)
		}
	})
}

// mustOpenShared opens a second engine on e's server and prefix; unlike
// MustOpenEngine it leaves the keys to e's cleanup.
func mustOpenShared(tb testing.TB, e *Engine) *Engine {
	tb.Helper()
	url := redisURL(tb)
	other, err := Open(tb.Context(), url, Options{Prefix: e.prefix}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Open(%s) = %v", url, err)
	}
	tb.Cleanup(func() { other.Close() })
	return other
}

// checkFor polls cond until it holds or the deadline passes.
func checkFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// commandCounter counts the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *commandCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestSoldOutBroadcast(t *testing.T) {
	url, prefix := redisURL(t), newPrefix()
	a := MustOpenEngine(t, url, prefix)
	b := MustOpenEngine(t, url, prefix)
	var counter commandCounter
	b.client.AddHook(&counter)
	ctx := t.Context()
	const within = 100 * time.Millisecond

	snap := newSale(5, 1, 3)
	snap.Sale.StartsAt = time.Now().Add(time.Hour) // so it can be reloaded below
	snap.Sale.EndsAt = snap.Sale.StartsAt.Add(time.Hour)
	mustLoad(t, a, snap)
	r := newReservation(snap, "u1", 0, 2, 1)
	mustReserve(t, a, r) // night 0 hits zero, night 1 keeps 2

	checkFor(t, within, "b hears night 0 is sold out", func() bool { return b.flags.soldOut(snap.Sale.ID, 0, 1) })
	if b.flags.soldOut(snap.Sale.ID, 1, 1) {
		t.Error("night 1 flagged sold out with 2 units left")
	}
	before := counter.n.Load()
	if _, err := b.Reserve(ctx, newReservation(snap, "u2", 0, 2, 1)); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("b.Reserve(stay with night 0) = %v, want ErrSoldOut", err)
	}
	if got := counter.n.Load() - before; got != 0 {
		t.Errorf("b.Reserve(sold-out stay) sent %d commands, want 0", got)
	}
	// A request with an idempotency key still asks Redis, so a retry finds its order.
	retry := newReservation(snap, "u1", 0, 1, 1)
	retry.IdempotencyKey = "k"
	if _, err := b.Reserve(ctx, retry); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Errorf("b.Reserve(keyed, sold out) = %v, want ErrSoldOut", err)
	}
	mustReserve(t, b, newReservation(snap, "u2", 1, 1, 1)) // night 1 alone is fine

	// Release on a gives night 0 back; b must hear it.
	if err := a.Release(ctx, snap.Sale.ID, r.OrderID); err != nil {
		t.Fatal(err)
	}
	checkFor(t, within, "b hears night 0 is back", func() bool { return !b.flags.soldOut(snap.Sale.ID, 0, 1) })
	mustReserve(t, b, newReservation(snap, "u3", 0, 1, 1))
	checkFor(t, within, "a hears night 0 is sold out again", func() bool { return a.flags.soldOut(snap.Sale.ID, 0, 1) })

	// A reload (before the start) clears every engine's flags.
	mustLoad(t, a, snap)
	checkFor(t, within, "b forgets the flags on load", func() bool { return !b.flags.soldOut(snap.Sale.ID, 0, 2) })

	// Retake takes the last unit again and is broadcast as well.
	r2 := newReservation(snap, "u4", 0, 1, 1)
	mustReserve(t, b, r2)
	checkFor(t, within, "a hears night 0 is sold out", func() bool { return a.flags.soldOut(snap.Sale.ID, 0, 1) })
	if err := b.Release(ctx, snap.Sale.ID, r2.OrderID); err != nil {
		t.Fatal(err)
	}
	checkFor(t, within, "a hears night 0 is back", func() bool { return !a.flags.soldOut(snap.Sale.ID, 0, 1) })
	if err := a.Retake(ctx, snap.Sale.ID, r2.OrderID); err != nil {
		t.Fatal(err)
	}
	checkFor(t, within, "b hears the retake sold night 0", func() bool { return b.flags.soldOut(snap.Sale.ID, 0, 1) })
}

// TestSoldOutOnLoad: a sale loaded with a night at zero (created with no
// rooms, or rebuilt after its last was sold) is flagged sold out by every
// engine, the one that loaded it included, however its own Load and the
// broadcast of that load interleave. Many sales, since it is a race.
func TestSoldOutOnLoad(t *testing.T) {
	url, prefix := redisURL(t), newPrefix()
	a := MustOpenEngine(t, url, prefix)
	b := MustOpenEngine(t, url, prefix)
	var counter commandCounter
	a.client.AddHook(&counter)
	for range 40 {
		snap := newSale(5, 0, 3)
		mustLoad(t, a, snap)
		for name, e := range map[string]*Engine{"the loader": a, "another engine": b} {
			checkFor(t, time.Second, name+" flags night 0 of a sale loaded with none", func() bool { return e.SoldOut(snap.Sale.ID, 0, 1) })
		}
		if a.SoldOut(snap.Sale.ID, 1, 1) {
			t.Fatal("night 1 flagged sold out with 3 rooms")
		}
		before := counter.n.Load()
		if _, err := a.Reserve(t.Context(), newReservation(snap, "u1", 0, 1, 1)); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatalf("Reserve(night 0) = %v, want ErrSoldOut", err)
		}
		if got := counter.n.Load() - before; got != 0 {
			t.Fatalf("Reserve of a flagged night sent %d commands, want 0", got)
		}
	}
}

func TestSoldOutFlags(t *testing.T) {
	var f soldOutFlags
	for _, m := range []string{"", "z", "z 1", "x 1 s", "z a,b s"} { // malformed: ignored
		f.apply(m)
	}
	f.apply("z 0,70 s1")
	f.apply("z 3 s 2") // a sale ID may hold spaces
	tests := []struct {
		sale          string
		first, nights int
		want          bool
	}{
		{"s1", 0, 1, true}, {"s1", 1, 5, false}, {"s1", 65, 10, true}, {"s1", 71, 3, false},
		{"s2", 0, 1, false}, {"s 2", 2, 2, true}, {"s1", -1, 1, false},
	}
	for _, tt := range tests {
		if got := f.soldOut(tt.sale, tt.first, tt.nights); got != tt.want {
			t.Errorf("soldOut(%q, %d, %d) = %v, want %v", tt.sale, tt.first, tt.nights, got, tt.want)
		}
	}
	f.apply("b 70 s1")
	if f.soldOut("s1", 65, 10) {
		t.Error("night 70 still flagged after b")
	}
	f.apply("l - s1")
	if f.soldOut("s1", 0, 1) {
		t.Error("night 0 still flagged after l")
	}
}

func TestUnconfirmed(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	ctx := t.Context()
	s1, s2 := newSale(5, 10), newSale(5, 10)
	mustLoad(t, e, s1)
	mustLoad(t, e, s2)

	var rs []*flashsale.Reservation
	for i := range 4 {
		snap := s1
		if i%2 == 1 {
			snap = s2
		}
		r := newReservation(snap, "u"+strconv.Itoa(i), 0, 1, 1)
		mustReserve(t, e, r)
		rs = append(rs, r)
		time.Sleep(2 * time.Millisecond) // distinct reserve times, so the order is known
	}
	if err := e.Confirm(ctx, rs[1].SaleID, rs[1].OrderID); err != nil {
		t.Fatal(err)
	}
	// A released reservation (the publish failed) must never be republished.
	if err := e.Release(ctx, rs[2].SaleID, rs[2].OrderID); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Second)
	// Confirm is written in the background.
	var got []flashsale.Reservation
	checkFor(t, 2*time.Second, "the confirm is written", func() bool {
		var err error
		if got, err = e.Unconfirmed(ctx, now, 10); err != nil {
			t.Fatal(err)
		}
		return len(got) <= 2
	})
	want := []flashsale.Reservation{*rs[0], *rs[3]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unconfirmed() mismatch (-want +got):\n%s", diff)
	}
	if got, err := e.Unconfirmed(ctx, now, 1); err != nil || len(got) != 1 || got[0].OrderID != rs[0].OrderID {
		t.Errorf("Unconfirmed(limit 1) = %+v, %v, want the oldest", got, err)
	}
	if got, err := e.Unconfirmed(ctx, time.Now().Add(-time.Hour), 10); err != nil || len(got) != 0 {
		t.Errorf("Unconfirmed(an hour ago) = %+v, %v, want none", got, err)
	}
}

func TestConfirm(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	ctx := t.Context()
	s1, s2 := newSale(100, 100), newSale(100, 100)
	mustLoad(t, e, s1)
	mustLoad(t, e, s2)
	reserve := func(snap *flashsale.StockSnapshot, n int) []*flashsale.Reservation {
		t.Helper()
		var rs []*flashsale.Reservation
		for range n {
			r := newReservation(snap, "u", 0, 1, 1)
			mustReserve(t, e, r)
			rs = append(rs, r)
		}
		return rs
	}
	// confirmed reports whether every order has left its outbox.
	confirmed := func(rs ...*flashsale.Reservation) bool {
		t.Helper()
		for _, r := range rs {
			err := e.client.ZScore(ctx, e.saleKeys(r.SaleID).unconfirmed, r.OrderID).Err()
			if err == nil {
				return false
			}
			if !errors.Is(err, goredis.Nil) {
				t.Fatal(err)
			}
		}
		return true
	}

	t.Run("OneRoundTrip", func(t *testing.T) {
		// A flush of confirms of two sales and a stale index deletion is
		// one pipeline.
		rs := append(reserve(s1, 3), reserve(s2, 2)...)
		stale := e.orderKey("stale-" + rand.Text())
		if err := e.client.Set(ctx, stale, s1.Sale.ID, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		f := mustOpenShared(t, e)
		var trips roundTrips
		f.client.AddHook(&trips)
		batch := []lazyWrite{{key: stale, del: true}}
		for _, r := range rs {
			batch = append(batch, lazyWrite{key: f.saleKeys(r.SaleID).unconfirmed, member: r.OrderID})
		}
		f.lazy.flush(batch, nil)
		if got := trips.n.Load(); got != 1 {
			t.Errorf("flush took %d round trips, want 1", got)
		}
		if !confirmed(rs...) {
			t.Error("orders still unconfirmed after flush")
		}
		if n := e.client.Exists(ctx, stale).Val(); n != 0 {
			t.Error("stale index still there after flush")
		}
	})

	t.Run("Background", func(t *testing.T) {
		rs := reserve(s1, 20)
		for _, r := range rs {
			if err := e.Confirm(ctx, r.SaleID, r.OrderID); err != nil {
				t.Fatal(err)
			}
		}
		checkFor(t, 2*time.Second, "confirms written", func() bool { return confirmed(rs...) })
	})

	t.Run("QueueFull", func(t *testing.T) {
		// With no room in the queue, Confirm writes before it returns.
		f := mustOpenShared(t, e)
		f.lazy.mu.Lock()
		f.lazy.max = 0
		f.lazy.mu.Unlock()
		r := reserve(s1, 1)[0]
		if err := f.Confirm(ctx, r.SaleID, r.OrderID); err != nil {
			t.Fatal(err)
		}
		if !confirmed(r) {
			t.Error("Confirm(queue full) returned before the order left the outbox")
		}
	})

	t.Run("CloseFlushes", func(t *testing.T) {
		f, err := Open(ctx, redisURL(t), Options{Prefix: e.prefix}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		rs := reserve(s2, 50)
		for _, r := range rs {
			if err := f.Confirm(ctx, r.SaleID, r.OrderID); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !confirmed(rs...) {
			t.Error("Close() returned with confirms unwritten")
		}
		r := reserve(s2, 1)[0]
		if err := f.Confirm(ctx, r.SaleID, r.OrderID); !errors.Is(err, flashsale.ErrUnavailable) {
			t.Errorf("Confirm(after Close) = %v, want ErrUnavailable", err)
		}
	})
}

// startCluster starts a three-master Redis Cluster on free ports and
// returns its seed URL; the servers are killed when the test ends.
func startCluster(t *testing.T) string {
	t.Helper()
	return testenv.StartRedisCluster(t, 3, 0, 15*time.Second).URL()
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	if os.Getenv(testenv.Redis) == "" && os.Getenv("CI") == "" {
		t.Skipf("set %s to run the Redis tests", testenv.Redis)
	}
	url := startCluster(t)
	t.Run("Suite", func(t *testing.T) {
		stocktest.Run(t, func(tb testing.TB) flashsale.StockEngine {
			return MustOpenEngine(tb, url, newPrefix()).Roles()
		})
	})
	t.Run("Broadcast", func(t *testing.T) {
		// Two engines most likely subscribed on different nodes than the
		// one holding the sale: the publish must cross the cluster bus.
		prefix := newPrefix()
		a, b := MustOpenEngine(t, url, prefix), MustOpenEngine(t, url, prefix)
		snap := newSale(5, 1)
		mustLoad(t, a, snap)
		mustReserve(t, a, newReservation(snap, "u", 0, 1, 1))
		checkFor(t, time.Second, "b hears the sale sold out", func() bool { return b.flags.soldOut(snap.Sale.ID, 0, 1) })
	})
	t.Run("Shard", func(t *testing.T) {
		// Each sale names the master of its slot: sales spread over the
		// three, so the breaker keeps a state per master.
		e := MustOpenEngine(t, url, newPrefix())
		shards := map[string]bool{}
		for range 30 {
			shard := e.Shard(newSale(1, 1).Sale.ID)
			if !strings.HasPrefix(shard, "127.0.0.1:") {
				t.Fatalf("Shard = %q, want a master's address", shard)
			}
			shards[shard] = true
		}
		if len(shards) != 3 {
			t.Fatalf("30 sales on %d shards, want 3: %v", len(shards), shards)
		}
	})
	t.Run("Unconfirmed", func(t *testing.T) {
		e := MustOpenEngine(t, url, newPrefix())
		var want []string
		for range 5 {
			snap := newSale(5, 3)
			mustLoad(t, e, snap)
			r := newReservation(snap, "u", 0, 1, 1)
			mustReserve(t, e, r)
			want = append(want, r.OrderID)
		}
		got, err := e.Unconfirmed(t.Context(), time.Now().Add(time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.OrderID)
		}
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Errorf("Unconfirmed() across slots mismatch (-want +got):\n%s", diff)
		}
	})
}

func BenchmarkReserve(b *testing.B) {
	e := MustOpenEngine(b, redisURL(b), newPrefix())
	for _, par := range []int{1, 32} {
		// Parallelism 32 is 32 goroutines per CPU: the flood shape, where
		// throughput comes from many requests in flight on the pool.
		b.Run("Accepted/goroutines="+strconv.Itoa(par)+"xCPU", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(par)
			snap := newSale(b.N+1, flashsale.MaxStock)
			mustLoad(b, e, snap)
			rs := make([]*flashsale.Reservation, b.N)
			for i := range rs {
				rs[i] = newReservation(snap, "u", 0, 1, 1)
			}
			var i atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Reserve(context.Background(), rs[i.Add(1)-1]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("SoldOutLocal", func(b *testing.B) {
		b.ReportAllocs()
		snap := newSale(5, 1)
		mustLoad(b, e, snap)
		mustReserve(b, e, newReservation(snap, "u", 0, 1, 1))
		checkFor(b, time.Second, "sold-out flag", func() bool { return e.flags.soldOut(snap.Sale.ID, 0, 1) })
		r := newReservation(snap, "v", 0, 1, 1)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := e.Reserve(context.Background(), r); !errors.Is(err, flashsale.ErrSoldOut) {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("SoldOutScript", func(b *testing.B) {
		// The same refusal with an idempotency key: one script round trip.
		b.ReportAllocs()
		snap := newSale(5, 1)
		mustLoad(b, e, snap)
		mustReserve(b, e, newReservation(snap, "u", 0, 1, 1))
		r := newReservation(snap, "v", 0, 1, 1)
		r.IdempotencyKey = "k"
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := e.Reserve(context.Background(), r); !errors.Is(err, flashsale.ErrSoldOut) {
					b.Error(err)
					return
				}
			}
		})
	})
}

// roundTrips counts the exchanges a client has with Redis: one per command
// sent alone and one per pipeline (per node on a Cluster, which the hook
// does not see, so it under-counts there). A new connection's handshake
// (HELLO, CLIENT SETINFO) is not counted.
type roundTrips struct{ n atomic.Int64 }

func handshake(cmd goredis.Cmder) bool { return cmd.Name() == "hello" || cmd.Name() == "client" }

func (c *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if !handshake(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// BenchmarkPurchase is an instance's Redis work for one accepted purchase
// in the distributed shape: Reserve, then Confirm once the broker has the
// order, from 64 goroutines (the accepted figure of BenchmarkDistributed
// uses 64 workers). roundtrips/op counts the exchanges with Redis.
func BenchmarkPurchase(b *testing.B) {
	b.ReportAllocs()
	var trips roundTrips
	e := MustOpenEngine(b, redisURL(b), newPrefix())
	e.client.AddHook(&trips)
	snap := newSale(b.N+1, flashsale.MaxStock)
	mustLoad(b, e, snap)
	rs := make([]*flashsale.Reservation, b.N)
	for i := range rs {
		rs[i] = newReservation(snap, "u"+strconv.Itoa(i%10000), 0, 1, 1)
	}
	const workers = 64
	b.SetParallelism((workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var next atomic.Int64
	ctx := context.Background()
	trips.n.Store(0)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := rs[next.Add(1)-1]
			if _, err := e.Reserve(ctx, r); err != nil {
				b.Error(err)
				return
			}
			if err := e.Confirm(ctx, r.SaleID, r.OrderID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	e.lazy.stop() // the last confirms count, in time and round trips
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(trips.n.Load())/float64(b.N), "roundtrips/op")
}

// TestNoDriverRetry holds Redis's replies at a proxy so a reserve's reply
// times out after Redis ran it: the engine must say so (an outcome it does
// not know) and never send the script again. go-redis retried it three
// times by default; the second run found the token spent and a guest who
// had been told sold out or over the limit read token_invalid.
func TestNoDriverRetry(t *testing.T) {
	ctx := t.Context()
	u, err := url.Parse(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	prefix := newPrefix()
	// The keys are deleted straight from Redis, with the conformance
	// suites' timeout: through the proxy, at this test's 100 ms, a loaded
	// CI machine timed the SCAN out.
	MustOpenEngine(t, redisURL(t), prefix)
	e, err := Open(ctx, proxy.URL(redisURL(t)), Options{Prefix: prefix, Timeout: 100 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	snap := newSale(1, 5)
	mustLoad(t, e, snap)
	r := newReservation(snap, "u", 0, 1, 1)
	var sent atomic.Int64
	proxy.Watch(func(_ int, chunk []byte) { sent.Add(int64(bytes.Count(chunk, []byte(r.OrderID)))) })
	proxy.HoldReplies(true)
	_, err = e.ReserveSpending(ctx, r, "token-1", time.Now().Add(time.Minute))
	proxy.HoldReplies(false)
	proxy.Watch(nil)
	if !flashsale.Unreachable(err) {
		t.Fatalf("reserve with its reply held: %v, want unavailable", err)
	}
	// The script carries the order ID once per run (its index entry may
	// carry it too, in the same pipeline): one run's worth, not four.
	once := sent.Load()
	if once == 0 {
		t.Fatal("the proxy saw no reserve")
	}
	r2 := newReservation(snap, "u2", 0, 1, 1)
	var sent2 atomic.Int64
	proxy.Watch(func(_ int, chunk []byte) { sent2.Add(int64(bytes.Count(chunk, []byte(r2.OrderID)))) })
	if _, err := e.ReserveSpending(ctx, r2, "token-2", time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("reserve with Redis answering: %v", err)
	}
	proxy.Watch(nil)
	if once != sent2.Load() {
		t.Fatalf("the timed-out reserve was sent %d times the bytes of one that answered (%d against %d): the driver retried it", once/sent2.Load(), once, sent2.Load())
	}
	// It ran once, in Redis: the reservation is there and the token spent.
	if got, err := e.Reservation(ctx, r.OrderID); err != nil || !got.Active {
		t.Fatalf("the reserve that timed out did not run: %+v, %v", got, err)
	}
}

// TestInstances: each Beat counts the instances that beat within
// fenceStale, the count every instance divides its rate limits by
// (flashsale.Shared); one that stopped beating is forgotten.
func TestInstances(t *testing.T) {
	ctx := t.Context()
	prefix := newPrefix()
	a := MustOpenEngine(t, redisURL(t), prefix)
	b := MustOpenEngine(t, redisURL(t), prefix)
	if n := a.Instances(); n != 1 {
		t.Fatalf("before any beat: %d instances, want 1", n)
	}
	// A third that beat long ago and stopped.
	if err := a.client.ZAdd(ctx, prefix+"instances", goredis.Z{Score: float64(time.Now().Add(-2 * fenceStale).UnixMilli()), Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Beat(ctx, "a", ""); err != nil {
		t.Fatal(err)
	}
	if n := a.Instances(); n != 1 {
		t.Fatalf("a alone beat: %d instances, want 1 (not the one gone)", n)
	}
	if err := b.Beat(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.Beat(ctx, "a", ""); err != nil {
		t.Fatal(err)
	}
	if na, nb := a.Instances(), b.Instances(); na != 2 || nb != 2 {
		t.Fatalf("after a, b, a beat: a counts %d, b %d; want 2 each", na, nb)
	}
}
