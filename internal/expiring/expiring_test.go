package expiring

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2030, 1, 1, 20, 0, 0, 0, time.UTC)

func TestGetSet(t *testing.T) {
	c := &clock{t: t0}
	m := New[string, int](Config{Now: c.Now})
	m.Set("a", 1, t0.Add(time.Minute))
	m.Set("a", 2, t0.Add(time.Minute))
	if v, ok := m.Get("a"); !ok || v != 2 {
		t.Fatalf("Get(a) = %d, %v; want 2, true", v, ok)
	}
	if _, ok := m.Get("b"); ok {
		t.Fatal("Get(b) found a key never set")
	}
	c.Add(time.Minute)
	if _, ok := m.Get("a"); ok {
		t.Fatal("Get(a) found an entry at its expiry")
	}
}

func TestAdd(t *testing.T) {
	t.Run("FirstWins", func(t *testing.T) {
		c := &clock{t: t0}
		m := New[string, struct{}](Config{Now: c.Now})
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if m.Add("k", struct{}{}, t0.Add(time.Minute)) {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Fatalf("%d Adds won, want exactly 1", got)
		}
	})
	t.Run("AfterExpiry", func(t *testing.T) {
		c := &clock{t: t0}
		m := New[string, struct{}](Config{Now: c.Now})
		m.Add("k", struct{}{}, t0.Add(time.Minute))
		c.Add(59 * time.Second)
		if m.Add("k", struct{}{}, t0.Add(time.Hour)) {
			t.Fatal("Add over a live entry won")
		}
		c.Add(time.Second)
		if !m.Add("k", struct{}{}, t0.Add(time.Hour)) {
			t.Fatal("Add over an expired entry lost")
		}
	})
}

// TestMax: a full map is emptied, not grown.
func TestMax(t *testing.T) {
	m := New[int, int](Config{Max: 4, Now: func() time.Time { return t0 }})
	for i := range 10 {
		m.Set(i, i, t0.Add(time.Hour))
		if got := m.Len(); got > 4 {
			t.Fatalf("holds %d entries, bound is 4", got)
		}
	}
}

// TestSweepOnGrowth: a storm's writes sweep as the map doubles, with no
// time passing on the timer.
func TestSweepOnGrowth(t *testing.T) {
	c := &clock{t: t0}
	m := New[string, struct{}](Config{Now: c.Now})
	for i := range 20_000 {
		if !m.Add(fmt.Sprint("k-", i), struct{}{}, c.Now().Add(time.Second)) {
			t.Fatalf("Add(k-%d) lost", i)
		}
		if i%100 == 99 {
			c.Add(time.Second)
		}
	}
	if got := m.Len(); got > 2*minSweep {
		t.Fatalf("holds %d entries, want at most %d (100 live)", got, 2*minSweep)
	}
}

// TestIdleEmpties is the reason for the package: once nobody writes, the
// timer sweeps what expired, the heap goes back to what it was, and the
// timer stops when nothing is left.
func TestIdleEmpties(t *testing.T) {
	const n = 200_000
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	// The entries expire when the test moves the clock, not while a loaded
	// machine is still inserting them (CI once took over 3 s to).
	c := &clock{t: t0}
	m := New[string, int](Config{Idle: 20 * time.Millisecond, Now: c.Now})
	exp := t0.Add(time.Minute)
	for i := range n {
		m.Set(fmt.Sprintf("a-key-as-long-as-a-token-id-%08d", i), i, exp)
	}
	full := heap()
	if full < before+n*32 {
		t.Fatalf("heap %d → %d with %d entries: the test measures nothing", before, full, n)
	}
	c.Add(time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for m.Len() > 0 || m.armed() {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left, timer armed %v, 10 s after they expired", m.Len(), m.armed())
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := heap()
	runtime.KeepAlive(m)
	if grew := int64(after) - int64(before); grew > int64(full-before)/10 {
		t.Fatalf("heap %d before, %d full, %d after the sweep: %d bytes kept, want under a tenth of the %d the entries took",
			before, full, after, grew, full-before)
	}
}

func (m *Map[K, V]) armed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.timer != nil
}
