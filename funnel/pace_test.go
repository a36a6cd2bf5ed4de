package funnel

import (
	"math"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestPaceHeldByStock: the measured pace is the queue's when it has rooms
// to give, so a stretch where the stock held it (a step sold out, rooms
// coming back a few at a time) does not drag every guest's ETA up. The
// queue moves 4 a step (20 a second) for 10 s, then for 6 s a room at a
// time comes back and goes (sold out at each step but the reopening one,
// which may fall on a sample's edge), then moves at 20 a second again for
// 2 s: the pace stays at 20.
func TestPaceHeldByStock(t *testing.T) {
	var r roomState
	at := time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)
	passed := 0
	step := func(moved int, soldOut bool) {
		at = at.Add(200 * time.Millisecond)
		passed += moved
		st := flashsale.QueueStats{Drawn: true, Admitted: passed, Waiting: 1000, SoldOut: soldOut}
		if r.at.IsZero() {
			r.stats, r.at, r.passed = st, at, passed
			return
		}
		r.measure(st, at, !soldOut && !r.stats.SoldOut)
		r.stats = st
	}
	for range 50 {
		step(4, false)
	}
	for i := range 30 { // a room back every third step, and gone
		step(map[bool]int{true: 1}[i%3 == 2], i%3 != 2)
	}
	for range 10 {
		step(4, false)
	}
	if math.Abs(r.pace-20) > 0.3 {
		t.Fatalf("pace %.1f a second after a stretch held by the stock, want 20", r.pace)
	}
}
