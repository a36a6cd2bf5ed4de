package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTogether: every call is in flight before any returns (each waits for
// all n to have begun), each is run once with its own i, and its latency
// and error land at that i.
func TestTogether(t *testing.T) {
	const n = 300
	var begun atomic.Int64
	all := make(chan struct{})
	var seen sync.Map
	// One deadline for all: calls run one by one fail in 5 s, not 5 s each.
	wait, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	lat, errs := Together(n, func(i int) error {
		if _, dup := seen.LoadOrStore(i, true); dup {
			return fmt.Errorf("call %d run twice", i)
		}
		if begun.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-wait.Done():
			return fmt.Errorf("call %d: only %d of %d calls began together", i, begun.Load(), n)
		}
		if i%10 == 0 {
			time.Sleep(20 * time.Millisecond)
			return errors.New("tenth")
		}
		return nil
	})
	if len(lat) != n || len(errs) != n {
		t.Fatalf("%d latencies, %d errors, want %d of each", len(lat), len(errs), n)
	}
	for i := range n {
		if i%10 == 0 {
			if errs[i] == nil || errs[i].Error() != "tenth" || lat[i] < 20*time.Millisecond {
				t.Fatalf("call %d: %v after %v, want its own error after 20 ms or more", i, errs[i], lat[i])
			}
		} else if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
	}
}

// TestBackToBack: n calls, each once, never more than workers in flight,
// every worker index below workers, latencies and errors by i, and the
// wall time that of the calls one after another per worker.
func TestBackToBack(t *testing.T) {
	const workers, n = 4, 40
	var (
		inFlight, most atomic.Int64
		mu             sync.Mutex
		runs           = map[int]int{}
	)
	elapsed, lat, errs := BackToBack(workers, n, func(w, i int) error {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		mu.Lock()
		runs[i]++
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		if w < 0 || w >= workers {
			return fmt.Errorf("worker %d", w)
		}
		if i%7 == 0 {
			return errors.New("seventh")
		}
		return nil
	})
	if m := most.Load(); m > workers || m < 2 {
		t.Errorf("%d calls in flight at most, want 2 to %d", m, workers)
	}
	for i := range n {
		if runs[i] != 1 {
			t.Errorf("call %d run %d times", i, runs[i])
		}
		if lat[i] < 10*time.Millisecond {
			t.Errorf("call %d: latency %v, want 10 ms or more", i, lat[i])
		}
		if want := i%7 == 0; (errs[i] != nil) != want || (want && errs[i].Error() != "seventh") {
			t.Errorf("call %d: error %v", i, errs[i])
		}
	}
	// Ten rounds of 10 ms per worker, well under one worker's 400 ms.
	if elapsed < 100*time.Millisecond || elapsed > 390*time.Millisecond {
		t.Errorf("elapsed %v, want about 100 ms (10 calls of 10 ms per worker)", elapsed)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		return s
	}
	for _, tt := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.99, 0},
		{ms(1), 0.5, time.Millisecond},
		{ms(2000), 0.99, 1981 * time.Millisecond},
		{ms(2000), 0.5, 1001 * time.Millisecond},
		{ms(10), 1, 10 * time.Millisecond},
		{ms(10), 0, time.Millisecond},
	} {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("Percentile(%d latencies, %v) = %v, want %v", len(tt.sorted), tt.p, got, tt.want)
		}
	}
}
