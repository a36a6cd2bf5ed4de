package inmem_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/inmem"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func MustNewSpentTokens(tb testing.TB) (*inmem.SpentTokens, *fakeClock) {
	tb.Helper()
	clock := &fakeClock{now: time.Date(2030, 1, 1, 20, 0, 0, 0, time.UTC)}
	return inmem.NewSpentTokens(clock.Now), clock
}

func TestSpentTokens(t *testing.T) {
	t.Run("FirstWins", func(t *testing.T) {
		s, clock := MustNewSpentTokens(t)
		exp := clock.Now().Add(time.Minute)
		for i, want := range []bool{true, false, false} {
			if got := s.Spend("tok-a", exp); got != want {
				t.Fatalf("Spend #%d = %v, want %v", i+1, got, want)
			}
		}
		if got := s.Spend("tok-b", exp); !got {
			t.Fatal("Spend(other token) = false, want true")
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s, clock := MustNewSpentTokens(t)
		exp := clock.Now().Add(time.Minute)
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if s.Spend("tok", exp) {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("%d spends won, want exactly 1", got)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		s, clock := MustNewSpentTokens(t)
		exp := clock.Now().Add(time.Minute)
		if ok := s.Spend("tok", exp); !ok {
			t.Fatal("first Spend lost")
		}
		clock.Add(59 * time.Second)
		if ok := s.Spend("tok", exp); ok {
			t.Fatal("Spend before expiry won")
		}
		clock.Add(time.Second)
		if ok := s.Spend("tok", clock.Now().Add(time.Minute)); !ok {
			t.Fatal("Spend after expiry lost, want the entry forgotten")
		}
	})

	t.Run("BoundedMemory", func(t *testing.T) {
		// Tokens live a second; spending 20 000 of them over time must
		// not keep 20 000 entries.
		s, clock := MustNewSpentTokens(t)
		for i := range 20_000 {
			if ok := s.Spend(fmt.Sprint("tok-", i), clock.Now().Add(time.Second)); !ok {
				t.Fatalf("Spend(tok-%d) lost", i)
			}
			if i%100 == 99 {
				clock.Add(time.Second)
			}
		}
		if got := s.Len(); got > 2048 {
			t.Fatalf("set remembers %d tokens, want at most 2048 (100 live)", got)
		}
	})
}
