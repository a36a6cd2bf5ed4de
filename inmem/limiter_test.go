package inmem_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
)

// TestLimiterLateCallers: a caller whose reading of the clock is late (it
// was preempted, or waited for a lock, after reading it) gets no more than
// the rate. Each step here grants one purchase now, one to a caller 90 ms
// late, then all the bucket has now: a bucket that took the late caller's
// time as its own counted those 90 ms again, 12 grants a step for 10 (CI:
// 299 grants where 221 were allowed, funnel TestSaleLimits).
func TestLimiterLateCallers(t *testing.T) {
	var now time.Time
	l := inmem.NewLimiterClock(func() time.Time { return now })
	t.Cleanup(func() { l.Close() })
	r := flashsale.PerSecond(100, 10)
	start := time.Now()
	granted := 0
	allow := func(at time.Time) bool {
		now = at
		ok, _, err := l.Allow(context.Background(), "buy-sale:hot", r)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			granted++
		}
		return ok
	}
	const steps = 10
	for k := range steps {
		at := start.Add(time.Duration(k) * 100 * time.Millisecond)
		allow(at)
		allow(at.Add(-90 * time.Millisecond))
		for allow(at) {
		}
	}
	want := 10 + 100*(time.Duration(steps-1)*100*time.Millisecond).Seconds()
	if float64(granted) > want {
		t.Errorf("%d granted in %d steps of 100 ms, the rate allows %.0f", granted, steps, want)
	}
}
