package stocktest

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// testStayRules checks that the engine judges every stay by its nights'
// rules (flashsale.CheckStay) inside the atomic step: from the snapshot at
// Load, and from SetStayRules mid-sale, with a refused stay changing
// nothing.
func testStayRules(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	t.Run("Each", func(t *testing.T) { testStayRulesEach(t, newEngine(t)) })
	t.Run("Set", func(t *testing.T) { testSetStayRules(t, newEngine(t)) })
	t.Run("RetakeIgnores", func(t *testing.T) { testRetakeIgnoresRules(t, newEngine(t)) })
	t.Run("Storm", func(t *testing.T) { testStayRulesStorm(t, newEngine(t)) })
}

// ruledSnapshot is a sale of six nights of stock 10 with a rule of each
// kind: night 1 needs 2 nights (max 3), night 2 is closed to arrival,
// night 3 to departure, night 5 is stop-sold.
func ruledSnapshot(limit int) *flashsale.StockSnapshot {
	snap := newSnapshot(limit, 10, 10, 10, 10, 10, 10)
	n := snap.Sale.Nights
	n[1].MinStay, n[1].MaxStay = 2, 3
	n[2].ClosedToArrival = true
	n[3].ClosedToDeparture = true
	n[5].StopSell = true
	return snap
}

func testStayRulesEach(t *testing.T, e flashsale.StockEngine) {
	snap := ruledSnapshot(100)
	mustLoad(t, e, snap, before(snap))
	for _, c := range []struct {
		first, nights int
		want          *flashsale.Error // nil: sold
		night         int
	}{
		{0, 1, nil, 0},
		{0, 2, nil, 0},
		{0, 3, flashsale.ErrClosedToDeparture, 3},
		{1, 1, flashsale.ErrMinStay, 1},
		{1, 2, flashsale.ErrClosedToDeparture, 3},
		{1, 3, nil, 0},
		{1, 4, flashsale.ErrMaxStay, 1},
		{3, 3, flashsale.ErrStopSell, 5},
		{0, 4, nil, 0}, // through the closed-to-arrival night, departing on 4
		{2, 1, flashsale.ErrClosedToArrival, 2},
		{3, 1, nil, 0}, // closed to departure is not closed to arrival
		{4, 1, nil, 0},
		{4, 2, flashsale.ErrStopSell, 5},
		{5, 1, flashsale.ErrStopSell, 5},
	} {
		t.Run(fmt.Sprintf("first=%d,nights=%d", c.first, c.nights), func(t *testing.T) {
			before, err := e.Available(t.Context(), snap.Sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			r := newReservation(snap, newID("user"), c.first, c.nights, 1, newID("key"))
			_, err = e.Reserve(t.Context(), r)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Reserve of an allowed stay: %v", err)
				}
				return
			}
			checkStayError(t, err, c.want, c.night)
			checkAvailable(t, e, snap, before...)
			if _, err := e.Lookup(t.Context(), snap.Sale.ID, r.UserID, r.IdempotencyKey); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("Lookup of a refused stay's key = %v, want ErrNotFound: the refusal must bind nothing", err)
			}
		})
	}
	t.Run("LimitUntouched", func(t *testing.T) {
		// A refusal takes nothing of the user's limit either.
		snap := ruledSnapshot(1)
		mustLoad(t, e, snap, before(snap))
		user := newID("user")
		_, err := e.Reserve(t.Context(), newReservation(snap, user, 1, 1, 1, ""))
		checkStayError(t, err, flashsale.ErrMinStay, 1)
		mustReserve(t, e, newReservation(snap, user, 0, 1, 1, ""))
	})
}

func checkStayError(tb testing.TB, err error, want *flashsale.Error, night int) {
	tb.Helper()
	var se *flashsale.StayError
	if !errors.As(err, &se) || se.Rule != want || se.Night != night {
		tb.Fatalf("Reserve = %v, want a *StayError of %s on night %d", err, want.Code, night)
	}
	if !errors.Is(err, want) || flashsale.ErrorCode(err) != want.Code {
		tb.Fatalf("Reserve = %v: errors.Is(%s) and ErrorCode must see the rule", err, want.Code)
	}
}

func testSetStayRules(t *testing.T, e flashsale.StockEngine) {
	ctx := t.Context()
	snap := newSnapshot(100, 5, 5, 5)
	mustLoad(t, e, snap, before(snap))
	id := snap.Sale.ID
	mustReserve(t, e, newReservation(snap, newID("user"), 1, 1, 1, ""))

	rules := make([]flashsale.StayRules, 3)
	rules[1].StopSell = true
	if err := e.SetStayRules(ctx, id, rules); err != nil {
		t.Fatalf("SetStayRules: %v", err)
	}
	_, err := e.Reserve(ctx, newReservation(snap, newID("user"), 0, 2, 1, ""))
	checkStayError(t, err, flashsale.ErrStopSell, 1)
	mustReserve(t, e, newReservation(snap, newID("user"), 2, 1, 1, ""))
	checkAvailable(t, e, snap, 5, 4, 4) // the stop-sell took no room back

	rules[1] = flashsale.StayRules{MinStay: 2}
	if err := e.SetStayRules(ctx, id, rules); err != nil {
		t.Fatalf("SetStayRules: %v", err)
	}
	_, err = e.Reserve(ctx, newReservation(snap, newID("user"), 1, 1, 1, ""))
	checkStayError(t, err, flashsale.ErrMinStay, 1)
	mustReserve(t, e, newReservation(snap, newID("user"), 1, 2, 1, "")) // reopened

	if err := e.SetStayRules(ctx, id, nil); err != nil {
		t.Fatalf("SetStayRules(nil): %v", err)
	}
	mustReserve(t, e, newReservation(snap, newID("user"), 1, 1, 1, ""))

	if err := e.SetStayRules(ctx, id, make([]flashsale.StayRules, 2)); flashsale.ErrorCode(err) != flashsale.EInvalid {
		t.Errorf("SetStayRules with 2 rules for 3 nights = %v, want invalid_request", err)
	}
	if err := e.SetStayRules(ctx, newID("sale"), rules); !errors.Is(err, flashsale.ErrNotLoaded) {
		t.Errorf("SetStayRules of an unknown sale = %v, want ErrNotLoaded", err)
	}

	// A reload before the start takes the rules from the snapshot's sale.
	again := newSnapshot(100, 5, 5, 5)
	again.Sale.ID, again.Sale.StartsAt, again.Sale.EndsAt = id, snap.Sale.StartsAt, snap.Sale.EndsAt
	again.Sale.Nights[0].ClosedToArrival = true
	mustLoad(t, e, again, before(again))
	_, err = e.Reserve(ctx, newReservation(again, newID("user"), 0, 1, 1, ""))
	checkStayError(t, err, flashsale.ErrClosedToArrival, 0)
	mustReserve(t, e, newReservation(again, newID("user"), 1, 1, 1, "")) // the old stop-sell is gone
}

// testRetakeIgnoresRules: a stop-sell does not refuse a retake. It
// completes a stay sold before the rule (a payment after the hold
// expired, a paid order counted again); refusing it would leave a paid
// order's rooms uncounted.
func testRetakeIgnoresRules(t *testing.T, e flashsale.StockEngine) {
	ctx := t.Context()
	snap := newSnapshot(100, 5)
	mustLoad(t, e, snap, before(snap))
	r := mustReserve(t, e, newReservation(snap, newID("user"), 0, 1, 2, ""))
	mustRelease(t, e, snap, r.OrderID)
	if err := e.SetStayRules(ctx, snap.Sale.ID, []flashsale.StayRules{{StopSell: true}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Retake(ctx, snap.Sale.ID, r.OrderID); err != nil {
		t.Fatalf("Retake through a stop-sold night: %v", err)
	}
	checkAvailable(t, e, snap, 3)
}

// testStayRulesStorm: 64 buyers reserve random stays of a sale with rules
// while the rules change under them. Stock never runs out, so only the
// rules refuse. Every answer must agree with CheckStay under the rules in
// force: the ones loaded, until the change; the new ones, for every call
// that began after SetStayRules returned. Calls that overlap the change
// may be judged by either. Afterwards the books balance.
func testStayRulesStorm(t *testing.T, e flashsale.StockEngine) {
	const (
		nights  = 8
		buyers  = 64
		perSide = 1500 // calls before the change and after it, in all
	)
	ctx := t.Context()
	snap := newSnapshot(1_000_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000)
	n := snap.Sale.Nights
	n[0].MinStay = 2
	n[2].ClosedToArrival = true
	n[4].ClosedToDeparture = true
	n[6].StopSell = true
	loaded := snap.Sale.StayRules()
	mustLoad(t, e, snap, before(snap))

	changed := make([]flashsale.StayRules, nights)
	changed[1] = flashsale.StayRules{MaxStay: 2, ClosedToDeparture: true}
	changed[3].StopSell = true
	changed[5].MinStay = 3
	changed[7].ClosedToDeparture = true

	type call struct {
		r          *flashsale.Reservation
		start, end time.Time
		err        error
	}
	var (
		mu    sync.Mutex
		calls []call
		done  atomic.Int64
		// changedAt is when SetStayRules returned; after counts the calls
		// that began later. The buyers go on until perSide of those are
		// made: an in-process engine once made all its calls before the
		// change returned, and the storm exercised nothing.
		changedAt atomic.Pointer[time.Time]
		after     atomic.Int64
	)
	var wg sync.WaitGroup
	for b := range buyers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(b), 25))
			for after.Load() < perSide {
				done.Add(1)
				first := rng.IntN(nights)
				stay := 1 + rng.IntN(min(4, nights-first))
				r := newReservation(snap, newID("user"), first, stay, 1, "")
				start := time.Now()
				_, err := e.Reserve(ctx, r)
				end := time.Now()
				if at := changedAt.Load(); at != nil && start.After(*at) {
					after.Add(1)
				}
				mu.Lock()
				calls = append(calls, call{r, start, end, err})
				mu.Unlock()
			}
		})
	}
	waitFor(t, "half the storm's calls", func() bool { return done.Load() >= perSide })
	at := time.Now()
	if err := e.SetStayRules(ctx, snap.Sale.ID, changed); err != nil {
		t.Fatalf("SetStayRules mid-storm: %v", err)
	}
	end := time.Now()
	changedAt.Store(&end)
	wg.Wait()

	taken := make([]int, nights)
	var afterChange, refused int
	for _, c := range calls {
		oldVerdict := flashsale.CheckStay(loaded, c.r.FirstNight, c.r.Nights)
		newVerdict := flashsale.CheckStay(changed, c.r.FirstNight, c.r.Nights)
		var allowed []error
		switch {
		case c.end.Before(at):
			allowed = []error{oldVerdict}
		case c.start.After(end):
			allowed = []error{newVerdict}
			afterChange++
		default:
			allowed = []error{oldVerdict, newVerdict}
		}
		if !verdictIn(c.err, allowed) {
			t.Errorf("stay first=%d nights=%d (%s): Reserve = %v, want one of %v",
				c.r.FirstNight, c.r.Nights, phase(c.start, c.end, at, end), c.err, allowed)
			continue
		}
		if c.err == nil {
			for i := c.r.FirstNight; i < c.r.FirstNight+c.r.Nights; i++ {
				taken[i]++
			}
		} else {
			refused++
		}
	}
	if afterChange < perSide || refused == 0 {
		t.Fatalf("the storm did not exercise the change: %d calls after it, %d refused", afterChange, refused)
	}
	want := make([]int, nights)
	for i := range want {
		want[i] = 100_000 - taken[i]
	}
	checkAvailable(t, e, snap, want...)
}

// verdictIn reports whether err is one of the verdicts: nil, or a
// *StayError of the same rule and night.
func verdictIn(err error, verdicts []error) bool {
	for _, v := range verdicts {
		if v == nil && err == nil {
			return true
		}
		var got, want *flashsale.StayError
		if errors.As(err, &got) && errors.As(v, &want) && *got == *want {
			return true
		}
	}
	return false
}

func phase(start, end, at, done time.Time) string {
	switch {
	case end.Before(at):
		return "before the change"
	case start.After(done):
		return "after the change"
	}
	return "during the change"
}
