// Package limittest is the conformance suite every flashsale.Limiter
// passes: the in-process one, alone and as one instance's share
// (flashsale.Shared). Each test uses keys of its own.
package limittest

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// Run runs the suite; newLimiter may return the same limiter every time.
func Run(t *testing.T, newLimiter func(tb testing.TB) flashsale.Limiter) {
	t.Run("Burst", func(t *testing.T) { testBurst(t, newLimiter(t)) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, newLimiter(t)) })
	t.Run("Off", func(t *testing.T) { testOff(t, newLimiter(t)) })
	t.Run("Sustained", func(t *testing.T) { testSustained(t, newLimiter(t)) })
	t.Run("RateChanged", func(t *testing.T) { testRateChanged(t, newLimiter(t)) })
}

func key(name string) string { return name + ":" + rand.Text()[:12] }

func allow(tb testing.TB, l flashsale.Limiter, k string, r flashsale.Rate) (bool, time.Duration) {
	tb.Helper()
	ok, after, err := l.Allow(context.Background(), k, r)
	if err != nil {
		tb.Fatalf("Allow(%s) = %v", k, err)
	}
	return ok, after
}

// testBurst: a key gets its burst at once, then is refused with a
// Retry-After of about one refill interval, and gets one more after it.
func testBurst(t *testing.T, l flashsale.Limiter) {
	r := flashsale.PerSecond(10, 5)
	k := key("burst")
	for i := range r.Burst {
		if ok, _ := allow(t, l, k, r); !ok {
			t.Fatalf("request %d of a burst of %d refused", i+1, r.Burst)
		}
	}
	ok, after := allow(t, l, k, r)
	if ok {
		t.Fatalf("request %d allowed, burst %d", r.Burst+1, r.Burst)
	}
	if after <= 0 || after > 150*time.Millisecond {
		t.Fatalf("Retry-After %v, want about 100 ms (one refill at 10/s)", after)
	}
	time.Sleep(after + 20*time.Millisecond)
	if ok, _ := allow(t, l, k, r); !ok {
		t.Fatalf("refused again %v after the Retry-After it gave", after)
	}
}

// testRateChanged: a key asked with a new Rate (a sale's limit edited, the
// instances' share changed) is held to it at once, not to the first.
func testRateChanged(t *testing.T, l flashsale.Limiter) {
	slow, fast := flashsale.Rate{N: 1, Per: time.Minute, Burst: 2}, flashsale.PerSecond(100, 5)
	k := key("changed")
	allow(t, l, k, slow)
	allow(t, l, k, slow)
	if ok, _ := allow(t, l, k, slow); ok {
		t.Fatal("a third request at 1/m,2 allowed")
	}
	allow(t, l, k, fast) // the change: 100/s from now
	time.Sleep(50 * time.Millisecond)
	if ok, after := allow(t, l, k, fast); !ok {
		t.Fatalf("50 ms after the rate went from 1/m to 100/s the key is still refused (Retry-After %v)", after)
	}
	// And back: at 1/m again, the burst left at 100/s is cut to 2 at most.
	n := 0
	for range 10 {
		if ok, _ := allow(t, l, k, slow); ok {
			n++
		}
	}
	if n > slow.Burst {
		t.Fatalf("%d allowed right after the rate went back to 1/m,2", n)
	}
}

// testKeys: one key's use takes nothing from another's.
func testKeys(t *testing.T, l flashsale.Limiter) {
	r := flashsale.PerSecond(1, 2)
	a, b := key("a"), key("b")
	allow(t, l, a, r)
	allow(t, l, a, r)
	if ok, _ := allow(t, l, a, r); ok {
		t.Fatal("a's third request allowed")
	}
	if ok, _ := allow(t, l, b, r); !ok {
		t.Fatal("b refused because of a")
	}
}

func testOff(t *testing.T, l flashsale.Limiter) {
	k := key("off")
	for range 1000 {
		if ok, _ := allow(t, l, k, flashsale.Rate{}); !ok {
			t.Fatal("a zero rate refused a request")
		}
	}
}

// testSustained hammers one key from 16 goroutines for two seconds: what
// is allowed is the burst plus two seconds of refill, within 10%.
func testSustained(t *testing.T, l flashsale.Limiter) {
	r := flashsale.PerSecond(100, 20)
	k := key("sustained")
	var allowed, refused atomic.Int64
	start := time.Now()
	const d = 2 * time.Second
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for time.Since(start) < d {
				ok, _, err := l.Allow(context.Background(), k, r)
				switch {
				case err != nil:
					t.Errorf("Allow: %v", err)
					return
				case ok:
					allowed.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	want := float64(r.Burst) + elapsed.Seconds()/r.Every().Seconds()
	got := float64(allowed.Load())
	t.Logf("%d allowed, %d refused in %v: want %.0f", allowed.Load(), refused.Load(), elapsed.Round(time.Millisecond), want)
	if got < 0.9*want || got > 1.1*want {
		t.Fatalf("%.0f allowed over %v, want %.0f ± 10%%", got, elapsed.Round(time.Millisecond), want)
	}
	if refused.Load() == 0 {
		t.Fatal("nothing refused: the hammer did not exceed the rate")
	}
}
