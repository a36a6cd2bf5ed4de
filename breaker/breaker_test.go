package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/stocktest"
	"github.com/oklog/ulid/v2"
)

var quiet = slog.New(slog.DiscardHandler)

// TestConformance: the wrapper is a stock engine like any other, the
// sold-out fast path, the ping and the outbox included.
func TestConformance(t *testing.T) {
	t.Run("InMemory", func(t *testing.T) {
		stocktest.Run(t, func(testing.TB) flashsale.StockEngine {
			return breaker.New(inmem.NewEngine().Roles(), breaker.Config{Logger: quiet}).Roles()
		})
	})
	t.Run("Redis", func(t *testing.T) {
		url := testenv.URL(t, testenv.Redis)
		// A storm on a loaded machine (CI runs the packages in parallel)
		// can keep a command past the 500 ms production default; the
		// suite is about answers, not latency.
		prefix := testenv.Name("fs-brk-") + ":"
		e, err := redis.Open(context.Background(), url, redis.Options{Prefix: prefix, Timeout: 5 * time.Second}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			e.Close()
			if err := testenv.DeleteKeys(url, prefix); err != nil {
				t.Errorf("delete the suite's keys: %v", err)
			}
		})
		// The suite skips the outbox of an engine that keeps none: a
		// wrapper that dropped Redis's would pass it unseen.
		if breaker.New(e.Roles(), breaker.Config{Logger: quiet}).Roles().Outbox == nil {
			t.Fatal("the breaker dropped the Redis engine's outbox")
		}
		stocktest.Run(t, func(testing.TB) flashsale.StockEngine {
			return breaker.New(e.Roles(), breaker.Config{Logger: quiet}).Roles()
		})
	})
}

// flaky is an engine whose every call answers err, counting the calls that
// reached it.
type flaky struct {
	flashsale.StockEngine
	mu    sync.Mutex
	err   error
	calls atomic.Int64
}

func (f *flaky) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *flaky) Available(ctx context.Context, saleID string) ([]int, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return []int{1}, nil
}

func (f *flaky) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.StockEngine.Missing(ctx, saleIDs)
}

func (f *flaky) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int)
	for _, id := range saleIDs {
		out[id] = []int{1}
	}
	return out, nil
}

// TestCounting: only "did not answer" opens the breaker; what an engine
// that answers says (sold out, not loaded) and what a client that gave up
// did, never.
func TestCounting(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		err   error
		opens bool
	}{
		{"Unavailable", fmt.Errorf("redis: %w", flashsale.ErrUnavailable), true},
		{"Deadline", fmt.Errorf("redis: %w", context.DeadlineExceeded), true},
		{"Indeterminate", fmt.Errorf("redis: %w", flashsale.ErrIndeterminate), true},
		{"NotLoaded", flashsale.ErrNotLoaded, false},
		{"SoldOut", flashsale.ErrSoldOut, false},
		{"NotFound", flashsale.ErrNotFound, false},
		{"Canceled", fmt.Errorf("redis: %w", context.Canceled), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{StockEngine: inmem.NewEngine().Roles(), err: tc.err}
			b := breaker.New(flashsale.EngineOf(f), breaker.Config{Failures: 3, OpenFor: time.Hour, Logger: quiet})
			for range 10 {
				b.Available(ctx, "s")
			}
			st := b.Status()
			if got := st.State == flashsale.BreakerOpen; got != tc.opens {
				t.Fatalf("after 10 × %v: state %s, want open=%v", tc.err, st.State, tc.opens)
			}
			want := int64(10)
			if tc.opens {
				want = 3 // the rest were refused without a call
			}
			if n := f.calls.Load(); n != want {
				t.Fatalf("%d calls reached the engine, want %d", n, want)
			}
			if tc.opens {
				_, err := b.Available(ctx, "s")
				if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, flashsale.ErrUnavailable) || flashsale.ErrorCode(err) != flashsale.EUnavailable {
					t.Fatalf("open breaker answered %v, want ErrOpen (unavailable)", err)
				}
				// It says when it will probe: the rest of its hour open.
				if wait, ok := flashsale.RetryAfter(err); !ok || wait < 59*time.Minute || wait > time.Hour {
					t.Fatalf("open breaker's Retry-After %v (%v), want the rest of the hour", wait, ok)
				}
			}
		})
	}
}

// TestHalfOpen: after OpenFor one probe goes through; its success closes
// the breaker, its failure opens it again.
func TestHalfOpen(t *testing.T) {
	ctx := context.Background()
	f := &flaky{StockEngine: inmem.NewEngine().Roles(), err: flashsale.ErrUnavailable}
	b := breaker.New(flashsale.EngineOf(f), breaker.Config{Failures: 2, OpenFor: 100 * time.Millisecond, Logger: quiet})
	b.Available(ctx, "s")
	b.Available(ctx, "s")
	if st := b.Status(); st.State != flashsale.BreakerOpen || st.ConsecutiveFailures != 0 {
		t.Fatalf("status %+v, want open", st)
	}
	time.Sleep(150 * time.Millisecond)
	if st := b.Status(); st.State != flashsale.BreakerHalfOpen {
		t.Fatalf("status %+v, want half-open", st)
	}
	if _, err := b.Available(ctx, "s"); errors.Is(err, breaker.ErrOpen) {
		t.Fatal("the probe was refused")
	}
	if st := b.Status(); st.State != flashsale.BreakerOpen {
		t.Fatalf("status %+v after a failed probe, want open again", st)
	}
	f.set(nil)
	time.Sleep(150 * time.Millisecond)
	if _, err := b.Available(ctx, "s"); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if st := b.Status(); st.State != flashsale.BreakerClosed {
		t.Fatalf("status %+v after a good probe, want closed", st)
	}
}

// TestForce: an operator pins the breaker open or closed, and hands it back.
func TestForce(t *testing.T) {
	ctx := context.Background()
	f := &flaky{StockEngine: inmem.NewEngine().Roles()}
	b := breaker.New(flashsale.EngineOf(f), breaker.Config{Failures: 1, OpenFor: time.Hour, Logger: quiet})
	if err := b.Force(flashsale.BreakerForceOpen); err != nil {
		t.Fatal(err)
	}
	_, err := b.Available(ctx, "s")
	if !errors.Is(err, breaker.ErrOpen) || f.calls.Load() != 0 {
		t.Fatalf("forced open: %v, %d calls", err, f.calls.Load())
	}
	if wait, _ := flashsale.RetryAfter(err); wait != time.Hour {
		t.Fatalf("forced open: Retry-After %v, want the open period (1h)", wait)
	}
	if st := b.Status(); st.State != flashsale.BreakerOpen || st.Forced != flashsale.BreakerForceOpen || b.Closed() {
		t.Fatalf("status %+v, closed %v", st, b.Closed())
	}
	// Forced closed: failures go through and are not counted.
	f.set(flashsale.ErrUnavailable)
	b.Force(flashsale.BreakerForceClosed)
	for range 5 {
		if _, err := b.Available(ctx, "s"); errors.Is(err, breaker.ErrOpen) {
			t.Fatal("forced closed refused a call")
		}
	}
	if f.calls.Load() != 5 {
		t.Fatalf("%d calls, want 5", f.calls.Load())
	}
	b.Force(flashsale.BreakerAuto)
	if st := b.Status(); st.State != flashsale.BreakerClosed || st.Forced != flashsale.BreakerAuto {
		t.Fatalf("status %+v after auto", st)
	}
	if !b.Closed() {
		t.Fatal("not closed after auto")
	}
	b.Available(ctx, "s")
	if st := b.Status(); st.State != flashsale.BreakerOpen || b.Closed() {
		t.Fatalf("status %+v, closed %v: counting did not resume", st, b.Closed())
	}
	for _, bad := range []flashsale.BreakerForce{"", "Open", "half-open", "off"} {
		if err := b.Force(bad); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("Force(%q) = %v, want invalid", bad, err)
		}
	}
	if st := b.Status(); st.Forced != flashsale.BreakerAuto {
		t.Fatalf("a bad Force changed the override: %+v", st)
	}
}

// counted counts the reserves that reach the engine.
type counted struct {
	flashsale.StockEngine
	reserves atomic.Int64
}

func (c *counted) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	c.reserves.Add(1)
	return c.StockEngine.Reserve(ctx, r)
}

// TestRedisLost kills a real redis-server under a stream of purchases: the
// breaker opens within a handful of calls, and from then on a purchase is
// refused without going to Redis instead of waiting out its deadline; the
// server comes back empty, the probe sees a Redis that answers (not loaded
// is an answer) and the breaker closes on its own.
func TestRedisLost(t *testing.T) {
	ctx := context.Background()
	rs := testenv.StartRedis(t)
	e, err := redis.Open(ctx, rs.URL(), redis.Options{Prefix: "brk:", Timeout: 200 * time.Millisecond}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	c := &counted{StockEngine: e.Roles()}
	// Open for long enough that the refusals below all fall inside it on a
	// loaded machine: at 300 ms, a CI run under load passed the open time
	// mid-loop and the half-open probe went to the dead Redis.
	const openFor = 2 * time.Second
	b := breaker.New(flashsale.EngineOf(c), breaker.Config{Failures: 5, OpenFor: openFor, Logger: quiet})
	saleID := ulid.Make().String()
	if err := b.Load(ctx, &flashsale.StockSnapshot{
		Sale:   fixture.Sale(fixture.ID(saleID), fixture.Stock(1000)),
		Nights: []flashsale.NightStock{{Date: testenv.Night(0), Stock: 1000, Available: 1000}},
	}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	buy := func(i int) error {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // as a request's deadline would
		defer cancel()
		_, err := b.Reserve(ctx, &flashsale.Reservation{
			OrderID: ulid.Make().String(), SaleID: saleID, UserID: fmt.Sprintf("u%d", i),
			Nights: 1, Rooms: 1, HoldExpiresAt: time.Now().Add(time.Minute), Active: true,
		})
		return err
	}
	if err := buy(0); err != nil {
		t.Fatal(err)
	}
	rs.Kill()
	failed := 0
	for i := 1; b.Status().State != flashsale.BreakerOpen; i++ {
		if err := buy(i); !flashsale.Unreachable(err) {
			t.Fatalf("purchase with Redis dead: %v", err)
		}
		if failed++; failed > 50 {
			t.Fatal("the breaker did not open")
		}
	}
	start, before := time.Now(), c.reserves.Load()
	n := 0
	for ; n < 1000 && time.Since(start) < openFor/2; n++ {
		if err := buy(100 + n); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("purchase with the breaker open: %v", err)
		}
	}
	if got := c.reserves.Load() - before; got != 0 {
		t.Fatalf("%d of %d purchases went to the dead Redis with the breaker open", got, n)
	}
	t.Logf("opened after %d failed calls; %d refusals took %v each", failed, n, time.Since(start)/time.Duration(n))

	rs.Start() // back, and empty
	back := time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for b.Status().State != flashsale.BreakerClosed {
		if time.Now().After(deadline) {
			t.Fatalf("the breaker did not close after Redis came back: %+v", b.Status())
		}
		_, err := b.Available(ctx, saleID)
		if err != nil && !errors.Is(err, breaker.ErrOpen) && !errors.Is(err, flashsale.ErrNotLoaded) && !flashsale.Unreachable(err) {
			t.Fatalf("probe: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("closed %v after Redis came back", time.Since(back))
	if _, err := b.Available(ctx, saleID); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Fatalf("after the restart: %v, want not loaded (the rebuild's cue)", err)
	}
}

// sharded is an engine of two shards, "s1" holding every sale but "b",
// whose shard "s1" can be made not to answer.
type sharded struct {
	flaky
}

func (s *sharded) Shard(saleID string) string {
	if saleID == "b" {
		return "s2"
	}
	return "s1"
}

func (s *sharded) Available(ctx context.Context, saleID string) ([]int, error) {
	if saleID == "b" {
		return []int{1}, nil
	}
	return s.flaky.Available(ctx, saleID)
}

func (s *sharded) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	if slices.Contains(saleIDs, "b") {
		if len(slices.DeleteFunc(slices.Clone(saleIDs), func(id string) bool { return id == "b" })) > 0 {
			return nil, fmt.Errorf("one call asked about shards s1 and s2: %q", saleIDs)
		}
		return s.flaky.StockEngine.Missing(ctx, saleIDs)
	}
	return s.flaky.Missing(ctx, saleIDs)
}

func (s *sharded) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	if slices.Contains(saleIDs, "b") {
		if len(saleIDs) > 1 {
			return nil, fmt.Errorf("one call asked about shards s1 and s2: %q", saleIDs)
		}
		return map[string][]int{"b": {2}}, nil
	}
	return s.flaky.AvailableOf(ctx, saleIDs)
}

// TestAvailableOf: the phantom watch's one call for every live sale is
// counted and refused shard by shard, as Missing is, but a dead shard
// does not silence the others: their sales are answered with its error.
func TestAvailableOf(t *testing.T) {
	ctx := context.Background()
	s := &sharded{flaky: flaky{StockEngine: inmem.NewEngine().Roles()}}
	b := breaker.New(flashsale.EngineOf(s), breaker.Config{Failures: 3, OpenFor: time.Hour, Logger: quiet})
	got, err := b.AvailableOf(ctx, []string{"b", "a", "x"})
	if want := map[string][]int{"a": {1}, "x": {1}, "b": {2}}; err != nil || !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("AvailableOf across shards = %v, %v; want %v", got, err, want)
	}
	s.set(fmt.Errorf("redis: %w", flashsale.ErrUnavailable))
	for range 10 {
		got, err := b.AvailableOf(ctx, []string{"a", "b"})
		if err == nil || len(got) != 1 || !slices.Equal(got["b"], []int{2}) {
			t.Fatalf("AvailableOf with shard s1 dead = %v, %v; want b's figures and an error", got, err)
		}
	}
	if n := s.calls.Load(); n != 1+3 {
		t.Fatalf("%d calls reached the dead shard, want 3 (then its breaker opened)", n-1)
	}
	if _, err := b.AvailableOf(ctx, []string{"a"}); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("a sale on the dead shard: %v, want ErrOpen", err)
	}
}

// TestMissing: the heal loop's one call for every live sale is counted
// and refused as Available is, shard by shard: a dead shard opens its own
// breaker and no other, its sales are refused, and the answer keeps the
// order of the sales asked about across shards.
func TestMissing(t *testing.T) {
	ctx := context.Background()
	t.Run("OneShard", func(t *testing.T) {
		f := &flaky{StockEngine: inmem.NewEngine().Roles(), err: fmt.Errorf("redis: %w", flashsale.ErrUnavailable)}
		b := breaker.New(flashsale.EngineOf(f), breaker.Config{Failures: 3, OpenFor: time.Hour, Logger: quiet})
		for range 10 {
			b.Missing(ctx, []string{"a", "b"})
		}
		if n := f.calls.Load(); n != 3 {
			t.Fatalf("%d calls reached the engine, want 3 (one per Missing, then the breaker opened)", n)
		}
		if _, err := b.Missing(ctx, []string{"a"}); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Missing while open: %v, want ErrOpen", err)
		}
		if got, err := b.Missing(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("Missing(none) while open: %q, %v; want nothing asked, nothing refused", got, err)
		}
	})
	t.Run("Shards", func(t *testing.T) {
		s := &sharded{flaky: flaky{StockEngine: inmem.NewEngine().Roles()}}
		b := breaker.New(flashsale.EngineOf(s), breaker.Config{Failures: 3, OpenFor: time.Hour, Logger: quiet})
		got, err := b.Missing(ctx, []string{"b", "a", "x", "b", "a"})
		if want := []string{"b", "a", "x"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("Missing across shards = %q, %v; want %q", got, err, want)
		}
		s.set(fmt.Errorf("redis: %w", flashsale.ErrUnavailable))
		for range 10 {
			b.Missing(ctx, []string{"a", "b"})
		}
		if n := s.calls.Load(); n != 1+3 {
			t.Fatalf("%d calls reached the dead shard, want 3 (then its breaker opened)", n-1)
		}
		if _, err := b.Missing(ctx, []string{"b", "a"}); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("a sale on the dead shard: %v, want ErrOpen", err)
		}
		if got, err := b.Missing(ctx, []string{"b"}); err != nil || !slices.Equal(got, []string{"b"}) {
			t.Fatalf("a sale on the live shard: %q, %v; want an answer", got, err)
		}
		if st := b.Status(); st.State != flashsale.BreakerClosed || st.ConsecutiveFailures != 0 {
			t.Fatalf("the whole engine's breaker: %+v, want closed", st)
		}
	})
}

// TestShards: on an engine of shards (a Redis Cluster), a dead shard opens
// its own breaker: its sales are refused at once, a sale on another shard
// is served, and the whole engine's state, which readiness and the db mode
// read, stays closed (issue 21, item 5). Before, one breaker per instance
// refused every sale while one master was down.
func TestShards(t *testing.T) {
	ctx := context.Background()
	s := &sharded{flaky: flaky{StockEngine: inmem.NewEngine().Roles(), err: fmt.Errorf("redis: %w", flashsale.ErrUnavailable)}}
	b := breaker.New(flashsale.EngineOf(s), breaker.Config{Failures: 3, OpenFor: time.Hour, Logger: quiet})
	for range 10 {
		b.Available(ctx, "a")
	}
	if n := s.calls.Load(); n != 3 {
		t.Fatalf("%d calls reached the dead shard, want 3 (then its breaker opened)", n)
	}
	if _, err := b.Available(ctx, "a"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("a sale on the dead shard: %v, want ErrOpen", err)
	}
	if _, err := b.Available(ctx, "b"); err != nil {
		t.Fatalf("a sale on the live shard: %v, want an answer", err)
	}
	if st := b.Status(); st.State != flashsale.BreakerClosed || st.ConsecutiveFailures != 0 {
		t.Fatalf("the whole engine's breaker: %+v, want closed", st)
	}
	// Forced open, every shard is refused.
	if err := b.Force(flashsale.BreakerForceOpen); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Available(ctx, "b"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("forced open, a sale on the live shard: %v, want ErrOpen", err)
	}
}
