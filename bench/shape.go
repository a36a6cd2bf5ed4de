package bench

import (
	"fmt"
	"iter"
	"math"
	"time"
)

// Shape is when guests arrive: the offsets from the start of a run at
// which sessions begin, in order. The schedule is fixed before the run, so
// a slow server cannot slow the arrivals down (open loop): a guest who
// arrives while the server is busy waits, and the wait is in its latency.
type Shape interface {
	Arrivals() iter.Seq[time.Duration]
	String() string
}

// The source's pulse: a ramp to 500 arrivals/s over the 20 s before the
// last ten of the countdown, 3 000/s in those ten, an 8 000/s peak for 12 s
// at zero, then the fall to nothing in 10 s. Pulse scales both axes.
const (
	PulsePeak   = 8000.0
	PulseLength = 52 * time.Second
)

// pulsePoints is the source's pulse as (second, rate) corners of a
// piecewise-linear rate; a step is two corners at the same second.
var pulsePoints = []point{{0, 0}, {20, 500}, {20, 3000}, {30, 3000}, {30, 8000}, {42, 8000}, {52, 0}}

// Pulse is the source's pulse with its peak at peak arrivals/s and its
// whole length stretched or shrunk to length, every phase in proportion.
func Pulse(peak float64, length time.Duration) Shape {
	ps := make([]point, len(pulsePoints))
	k := length.Seconds() / PulseLength.Seconds()
	for i, p := range pulsePoints {
		ps[i] = point{p.t * k, p.rate * peak / PulsePeak}
	}
	return rateShape{name: fmt.Sprintf("pulse (peak %.0f/s, %s)", peak, length), points: ps}
}

// Constant is rate arrivals/s for length.
func Constant(rate float64, length time.Duration) Shape {
	return rateShape{name: fmt.Sprintf("constant (%.0f/s, %s)", rate, length), points: []point{{0, rate}, {length.Seconds(), rate}}}
}

// Ramp rises linearly from nothing to peak arrivals/s over length.
func Ramp(peak float64, length time.Duration) Shape {
	return rateShape{name: fmt.Sprintf("ramp (to %.0f/s, %s)", peak, length), points: []point{{0, 0}, {length.Seconds(), peak}}}
}

// Burst is guests arriving all at once: the source's 2 000 guests at the
// second the countdown ends.
func Burst(guests int) Shape { return burst(guests) }

type burst int

func (b burst) String() string { return fmt.Sprintf("burst (%d guests at once)", int(b)) }

func (b burst) Arrivals() iter.Seq[time.Duration] {
	return func(yield func(time.Duration) bool) {
		for range int(b) {
			if !yield(0) {
				return
			}
		}
	}
}

type point struct{ t, rate float64 } // seconds, arrivals/s

// rateShape is a piecewise-linear arrival rate; the k-th arrival is where
// the rate's integral reaches k-1/2, so arrivals are evenly spread at the
// rate of the moment and a constant shape of n/s for a second has n.
type rateShape struct {
	name   string
	points []point
}

func (s rateShape) String() string { return s.name }

func (s rateShape) Arrivals() iter.Seq[time.Duration] {
	return func(yield func(time.Duration) bool) {
		var done float64 // the integral up to the segment's start
		next := 0.5      // the integral at the next arrival
		for i := 1; i < len(s.points); i++ {
			p, q := s.points[i-1], s.points[i]
			span := q.t - p.t
			if span <= 0 {
				continue
			}
			a, b := p.rate, (q.rate-p.rate)/span // rate(p.t+x) = a + b·x
			area := (a + q.rate) / 2 * span
			for next <= done+area {
				if !yield(time.Duration((p.t + solve(a, b, next-done)) * float64(time.Second))) {
					return
				}
				next++
			}
			done += area
		}
	}
}

// solve returns x ≥ 0 where a·x + b·x²/2 = n: the time into a segment
// whose rate starts at a and changes by b each second at which n arrivals
// have come.
func solve(a, b, n float64) float64 {
	if math.Abs(b) < 1e-12 {
		return n / a
	}
	return (math.Sqrt(math.Max(0, a*a+2*b*n)) - a) / b
}

// Count is how many arrivals s schedules.
func Count(s Shape) int {
	n := 0
	for range s.Arrivals() {
		n++
	}
	return n
}
