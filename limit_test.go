package flashsale_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/limittest"
)

func TestRateShare(t *testing.T) {
	for _, c := range []struct {
		r    flashsale.Rate
		n    int
		want flashsale.Rate
	}{
		{flashsale.PerSecond(20, 40), 1, flashsale.PerSecond(20, 40)},
		{flashsale.PerSecond(20, 40), 0, flashsale.PerSecond(20, 40)},
		{flashsale.PerSecond(20, 40), 3, flashsale.Rate{N: 20, Per: 3 * time.Second, Burst: 14}},
		{flashsale.Rate{N: 1, Per: time.Minute, Burst: 3}, 3, flashsale.Rate{N: 1, Per: 3 * time.Minute, Burst: 1}},
		{flashsale.Rate{N: 1, Per: time.Minute, Burst: 1}, 5, flashsale.Rate{N: 1, Per: 5 * time.Minute, Burst: 1}},
		{flashsale.Rate{}, 4, flashsale.Rate{}},
	} {
		if got := c.r.Share(c.n); got != c.want {
			t.Errorf("%v.Share(%d) = %+v, want %+v", c.r, c.n, got, c.want)
		}
	}
}

// TestShared: three instances, each counting its share of the limits
// alone, behind a balancer that spreads the requests: together they allow
// a key its burst once, and its rate once under a two-second hammer.
func TestShared(t *testing.T) {
	var instances atomic.Int64
	instances.Store(3)
	var ls []flashsale.Limiter
	for range 3 {
		l := inmem.NewLimiter()
		t.Cleanup(func() { l.Close() })
		ls = append(ls, flashsale.Shared(l, func() int { return int(instances.Load()) }))
	}
	ctx := context.Background()
	t.Run("Conformance", func(t *testing.T) {
		limittest.Run(t, func(tb testing.TB) flashsale.Limiter {
			l := inmem.NewLimiter()
			tb.Cleanup(func() { l.Close() })
			return flashsale.Shared(l, func() int { return 1 })
		})
	})
	t.Run("Burst", func(t *testing.T) {
		r := flashsale.Rate{N: 1, Per: time.Minute, Burst: 6}
		n := 0
		for i := range 30 {
			if ok, _, _ := ls[i%3].Allow(ctx, "burst", r); ok {
				n++
			}
		}
		if n != r.Burst {
			t.Fatalf("%d of 30 allowed across three instances, want the one burst of %d", n, r.Burst)
		}
	})
	t.Run("Sustained", func(t *testing.T) {
		r := flashsale.PerSecond(150, 30)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for g := range 12 {
			wg.Go(func() {
				for time.Since(start) < 2*time.Second {
					if ok, _, _ := ls[g%3].Allow(ctx, "sustained", r); ok {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		// Above is the invariant (three shares make one rate): at most 10%
		// over. Below is looser: a goroutine starved longer than a
		// share's bucket takes to fill (10 tokens at 50/s) loses what
		// overflows, and CI, with cmd/flashsale's storms beside it, once
		// allowed 252 of 331. A share cut wrongly (a ninth) allows a third.
		want := float64(r.Burst) + time.Since(start).Seconds()*float64(r.N)
		if got := float64(allowed.Load()); got < 0.6*want || got > 1.1*want {
			t.Fatalf("%.0f allowed across three instances, want %.0f (at most 10%% over, at least 60%%)", got, want)
		}
	})
	t.Run("InstanceLeft", func(t *testing.T) {
		// One of three goes: the two left each allow half, from then on.
		r := flashsale.Rate{N: 1, Per: time.Hour, Burst: 4}
		instances.Store(2)
		n := 0
		for i := range 20 {
			if ok, _, _ := ls[i%2].Allow(ctx, "left", r); ok {
				n++
			}
		}
		if n != r.Burst {
			t.Fatalf("%d of 20 allowed across the two instances left, want the one burst of %d", n, r.Burst)
		}
	})
}
