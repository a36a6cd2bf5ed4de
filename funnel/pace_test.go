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
		r.measure(st, at, !soldOut && !r.stats.SoldOut, 20)
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
	if math.Abs(r.avg-20) > 0.3 {
		t.Fatalf("pace %.1f a second after a stretch held by the stock, want 20", r.avg)
	}
}

// TestPaceShown: the pace ETAs are computed at starts a little under the
// set rate, follows the measured pace up at once (ETAs fall), holds
// through a wavering dip (ETAs do not rise), and follows a real slowdown
// down (ETAs rise, honestly).
func TestPaceShown(t *testing.T) {
	for _, c := range []struct {
		name           string
		cur, avg, want float64
	}{
		{"before any measure", 0, 0, 47.5},
		{"the queue is faster", 47.5, 60, 57},
		{"a dip of 5%", 57, 57, 57},
		{"a dip under 10%", 57, 54.5, 57},
		{"really slower", 57, 40, 38},
	} {
		if got := shown(c.cur, c.avg, 50); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: shown(%v, %v, 50) = %v, want %v", c.name, c.cur, c.avg, got, c.want)
		}
	}
}
