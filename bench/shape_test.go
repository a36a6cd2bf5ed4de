package bench

import (
	"math"
	"slices"
	"testing"
	"time"
)

// count is how many of s's arrivals fall in [from, to).
func count(s Shape, from, to time.Duration) int {
	n := 0
	for at := range s.Arrivals() {
		if at >= from && at < to {
			n++
		}
	}
	return n
}

func TestPulse(t *testing.T) {
	t.Run("Source", func(t *testing.T) {
		// The source's pulse: 0 → 500/s over 20 s (5 000), 3 000/s for
		// 10 s, 8 000/s for 12 s, 8 000 → 0 over 10 s (40 000).
		s := Pulse(PulsePeak, PulseLength)
		for _, tt := range []struct {
			from, to time.Duration
			want     int
		}{
			{0, 20 * time.Second, 5000},
			{20 * time.Second, 30 * time.Second, 30000},
			{30 * time.Second, 42 * time.Second, 96000},
			{42 * time.Second, 52 * time.Second, 40000},
			{30 * time.Second, 31 * time.Second, 8000},
			{21 * time.Second, 22 * time.Second, 3000},
			{19 * time.Second, 20 * time.Second, 488}, // 475 to 500/s: 487.5
			{51 * time.Second, 52 * time.Second, 400}, // 800 to 0/s
		} {
			if got := count(s, tt.from, tt.to); math.Abs(float64(got-tt.want)) > 1 {
				t.Errorf("arrivals in [%s, %s) = %d, want %d", tt.from, tt.to, got, tt.want)
			}
		}
		if got := Count(s); got != 171000 {
			t.Errorf("Count = %d, want 171000", got)
		}
	})
	t.Run("Scaled", func(t *testing.T) {
		// --peak 800 --duration 5.2s: every rate a tenth, every phase a tenth as long.
		s := Pulse(800, 5200*time.Millisecond)
		if got, want := Count(s), 1710; math.Abs(float64(got-want)) > 1 {
			t.Errorf("Count = %d, want %d", got, want)
		}
		if got := count(s, 3*time.Second, 4200*time.Millisecond); math.Abs(float64(got-960)) > 1 {
			t.Errorf("peak arrivals = %d, want 800/s for 1.2 s = 960", got)
		}
	})
}

func TestShapes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		shape Shape
		want  int
	}{
		{"Constant", Constant(100, 3*time.Second), 300},
		{"Ramp", Ramp(100, 4*time.Second), 200},
		{"Burst", Burst(2000), 2000},
		{"Pulse", Pulse(1000, 20*time.Second), 8221},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var all []time.Duration
			for at := range tt.shape.Arrivals() {
				all = append(all, at)
			}
			if len(all) != tt.want {
				t.Errorf("%d arrivals, want %d", len(all), tt.want)
			}
			if !slices.IsSorted(all) {
				t.Error("arrivals out of order")
			}
		})
	}
	t.Run("ConstantEvenlySpread", func(t *testing.T) {
		var all []time.Duration
		for at := range Constant(10, time.Second).Arrivals() {
			all = append(all, at)
		}
		for i, at := range all {
			if want := time.Duration(i)*100*time.Millisecond + 50*time.Millisecond; (at - want).Abs() > time.Microsecond {
				t.Errorf("arrival %d at %s, want %s", i, at, want)
			}
		}
	})
	t.Run("RampRises", func(t *testing.T) {
		s := Ramp(1000, 10*time.Second)
		if first, last := count(s, 0, time.Second), count(s, 9*time.Second, 10*time.Second); first != 50 || last != 950 {
			t.Errorf("first second %d, last %d; want 50 and 950", first, last)
		}
	})
	t.Run("BurstAllAtZero", func(t *testing.T) {
		if got := count(Burst(5), 0, time.Nanosecond); got != 5 {
			t.Errorf("%d at zero, want 5", got)
		}
	})
}
