// Package forcetest is the conformance suite every flashsale.ForceBoard
// passes: the MySQL and the PostgreSQL stores run the same tests. Each test
// needs a database of its own (the switches are one row), reached through
// two handles, as two instances of a deployment reach it.
package forcetest

import (
	"context"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
)

// Run runs the suite. newBoards returns two boards on one fresh database.
func Run(t *testing.T, newBoards func(tb testing.TB) (a, b flashsale.ForceBoard)) {
	t.Run("Fresh", func(t *testing.T) { a, _ := newBoards(t); testFresh(t, a) })
	t.Run("Shared", func(t *testing.T) { a, b := newBoards(t); testShared(t, a, b) })
	t.Run("ErrInvalid", func(t *testing.T) { a, b := newBoards(t); testInvalid(t, a, b) })
	t.Run("Race", func(t *testing.T) { a, b := newBoards(t); testRace(t, a, b) })
}

func get(tb testing.TB, b flashsale.ForceBoard) flashsale.BreakerForce {
	tb.Helper()
	f, err := b.BreakerForce(context.Background())
	if err != nil {
		tb.Fatalf("BreakerForce() = %v", err)
	}
	return f
}

func set(tb testing.TB, b flashsale.ForceBoard, f flashsale.BreakerForce) {
	tb.Helper()
	if err := b.SetBreakerForce(context.Background(), f); err != nil {
		tb.Fatalf("SetBreakerForce(%q) = %v", f, err)
	}
}

// testFresh: a new deployment leaves the breaker to its failure counting.
func testFresh(t *testing.T, b flashsale.ForceBoard) {
	if f := get(t, b); f != flashsale.BreakerAuto {
		t.Fatalf("fresh BreakerForce() = %q, want %q", f, flashsale.BreakerAuto)
	}
}

// testShared: what one instance sets, every other reads, each override
// in turn, and the last one set stands.
func testShared(t *testing.T, a, b flashsale.ForceBoard) {
	for _, f := range []flashsale.BreakerForce{flashsale.BreakerForceOpen, flashsale.BreakerForceClosed, flashsale.BreakerAuto, flashsale.BreakerForceOpen} {
		set(t, a, f)
		if got := get(t, b); got != f {
			t.Fatalf("after a set %q, b reads %q", f, got)
		}
		if got := get(t, a); got != f {
			t.Fatalf("after a set %q, a reads %q", f, got)
		}
	}
	set(t, b, flashsale.BreakerAuto)
	if got := get(t, a); got != flashsale.BreakerAuto {
		t.Fatalf("after b set auto, a reads %q", got)
	}
}

// testInvalid: the database refuses anything but an override, and it
// changes nothing.
func testInvalid(t *testing.T, a, b flashsale.ForceBoard) {
	set(t, a, flashsale.BreakerForceOpen)
	for _, f := range []flashsale.BreakerForce{"", "half-open", "OPEN", "open ", "auto'; --"} {
		err := a.SetBreakerForce(context.Background(), f)
		if err == nil {
			t.Errorf("SetBreakerForce(%q) = nil, want the database's refusal", f)
		}
	}
	if got := get(t, b); got != flashsale.BreakerForceOpen {
		t.Fatalf("after refused sets, b reads %q, want open", got)
	}
}

// testRace: two instances switching at once leave one of their values,
// never anything else, and both read the same.
func testRace(t *testing.T, a, b flashsale.ForceBoard) {
	var wg sync.WaitGroup
	for i, board := range []flashsale.ForceBoard{a, b} {
		f := []flashsale.BreakerForce{flashsale.BreakerForceOpen, flashsale.BreakerForceClosed}[i]
		wg.Go(func() {
			for range 20 {
				if err := board.SetBreakerForce(context.Background(), f); err != nil {
					t.Errorf("SetBreakerForce(%q) = %v", f, err)
					return
				}
				if _, err := board.BreakerForce(context.Background()); err != nil {
					t.Errorf("BreakerForce() = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	fa, fb := get(t, a), get(t, b)
	if fa != fb || (fa != flashsale.BreakerForceOpen && fa != flashsale.BreakerForceClosed) {
		t.Fatalf("after the race a reads %q, b %q: want the same, open or closed", fa, fb)
	}
}
