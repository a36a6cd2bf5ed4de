package stocktest

import (
	"errors"
	mrand "math/rand/v2"
	"testing"

	"github.com/flashsale/flashsale"
)

// testSlots is the slot kind's storm: the engine sees a slot sale as units
// each with a capacity and a purchase taking a quantity of exactly one
// (a table for 4 takes 4 covers of one service). 2 400 parties of 1 to 6
// from 1 200 guests (limit 6 places each) on six services of 40 covers
// at once: no service oversold, no party split or shrunk, every refusal
// sold out or the limit, and a service left with places refused only
// parties larger than what it had left.
func testSlots(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	const (
		services = 6
		covers   = 40
		guests   = 1200
		parties  = 2400
		maxParty = 6
	)
	e := newEngine(t)
	stocks := make([]int, services)
	for i := range stocks {
		stocks[i] = covers
	}
	snap := newSnapshot(maxParty, stocks...)
	snap.Sale.Kind, snap.Sale.TimeZone = flashsale.KindSlot, "Europe/Paris"
	for i := range snap.Sale.Nights {
		snap.Sale.Nights[i].Date = snap.Sale.Nights[i/3*3].Date // three services a day
		snap.Sale.Nights[i].Time = [...]string{"12:00", "19:00", "21:30"}[i%3]
	}
	mustLoad(t, e, snap, before(snap))

	users := make([]string, guests)
	for i := range users {
		users[i] = newID("guest")
	}
	rng := mrand.New(mrand.NewPCG(25, 2))
	rs := make([]*flashsale.Reservation, parties)
	for i := range rs {
		rs[i] = newReservation(snap, users[rng.IntN(guests)], rng.IntN(services), 1, 1+rng.IntN(maxParty), "")
	}
	results := reserveAll(t, e, rs)

	var active []*flashsale.Reservation
	smallestRefused := make([]int, services)
	for i := range smallestRefused {
		smallestRefused[i] = maxParty + 1
	}
	for i, res := range results {
		r := rs[i]
		switch {
		case res.err == nil:
			active = append(active, r)
		case errors.Is(res.err, flashsale.ErrSoldOut):
			smallestRefused[r.FirstNight] = min(smallestRefused[r.FirstNight], r.Rooms)
		case errors.Is(res.err, flashsale.ErrLimitExceeded):
		default:
			t.Fatalf("Reserve(party of %d, service %d) = %v", r.Rooms, r.FirstNight, res.err)
		}
	}
	avail := checkBooks(t, e, snap, stocks, active, maxParty)
	for i, left := range avail {
		if left >= smallestRefused[i] {
			t.Errorf("service %d refused a party of %d as sold out with %d covers left", i, smallestRefused[i], left)
		}
	}
	checkOrders(t, e, snap, rs, results)
	if t.Failed() {
		return
	}
	// What is left sells to parties of one, to the last cover.
	for i, left := range avail {
		for range left {
			mustReserve(t, e, newReservation(snap, newID("last"), i, 1, 1, ""))
		}
		if _, err := e.Reserve(t.Context(), newReservation(snap, newID("late"), i, 1, 1, "")); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Errorf("service %d after its last cover: %v, want ErrSoldOut", i, err)
		}
	}
	checkAvailable(t, e, snap, make([]int, services)...)
}

// testChoices: a reservation with choices takes its places from one unit,
// the first of the choices with them free, and names it; a group is never
// split, so with 3 places left in each of two vehicles a group of 4 is
// sold out. Release and retake act on the unit taken.
func testChoices(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	ctx := t.Context()
	e := newEngine(t)
	snap := newSnapshot(100, 8, 8, 8) // a departure of two vehicles of 8 (units 0, 1), and another (unit 2)
	mustLoad(t, e, snap, before(snap))
	group := func(seats int) *flashsale.Reservation {
		r := newReservation(snap, newID("group"), 0, 1, seats, "")
		r.Choices = 2
		return r
	}
	for _, c := range []struct {
		seats, unit int
	}{{5, 0}, {5, 1}, {3, 0}, {3, 1}} {
		r := group(c.seats)
		mustReserve(t, e, r)
		if r.FirstNight != c.unit {
			t.Fatalf("a group of %d took unit %d, want %d", c.seats, r.FirstNight, c.unit)
		}
		got, err := e.Reservation(ctx, r.OrderID)
		if err != nil || got.FirstNight != c.unit || got.Rooms != c.seats || got.Nights != 1 {
			t.Fatalf("Reservation(%s) = %+v, %v, want unit %d, %d places", r.OrderID, got, err, c.unit, c.seats)
		}
	}
	checkAvailable(t, e, snap, 0, 0, 8)
	r := group(1)
	if _, err := e.Reserve(ctx, r); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("a group on a full departure = %v, want ErrSoldOut", err)
	}

	e2 := newEngine(t)
	snap2 := newSnapshot(100, 8, 8)
	mustLoad(t, e2, snap2, before(snap2))
	split := func(seats int) *flashsale.Reservation {
		r := newReservation(snap2, newID("group"), 0, 1, seats, "")
		r.Choices = 2
		return r
	}
	a, b := mustReserve(t, e2, split(5)), mustReserve(t, e2, split(5))
	if _, err := e2.Reserve(ctx, split(4)); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("a group of 4 with 3 places left in each vehicle = %v, want ErrSoldOut: a group is never split", err)
	}
	mustRelease(t, e2, snap2, b.OrderID)
	checkAvailable(t, e2, snap2, 3, 8)
	if err := e2.Retake(ctx, snap2.Sale.ID, b.OrderID); err != nil {
		t.Fatalf("Retake: %v", err)
	}
	checkAvailable(t, e2, snap2, 3, 3)
	if a.FirstNight != 0 || b.FirstNight != 1 {
		t.Fatalf("groups took units %d and %d, want 0 and 1", a.FirstNight, b.FirstNight)
	}
	for name, r := range map[string]*flashsale.Reservation{
		"two nights":   func() *flashsale.Reservation { r := split(1); r.Nights = 2; return r }(),
		"past the end": func() *flashsale.Reservation { r := split(1); r.FirstNight = 1; return r }(),
	} {
		if _, err := e2.Reserve(ctx, r); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("choices with %s = %v, want invalid_request", name, err)
		}
	}
}

// testShuttleStorm: a shuttle of 4 departures of 2 vehicles x 8 seats;
// 1 000 groups of 1 to 5 at once, each kept together in one vehicle of
// its departure. No vehicle oversold, each group in one vehicle of its
// own departure, and a group refused only when no vehicle had its seats.
func testShuttleStorm(t *testing.T, newEngine func(tb testing.TB) flashsale.StockEngine) {
	const (
		departures = 4
		vehicles   = 2
		seats      = 8
		groups     = 1000
		maxGroup   = 5
	)
	e := newEngine(t)
	stocks := make([]int, departures*vehicles)
	for i := range stocks {
		stocks[i] = seats
	}
	snap := newSnapshot(maxGroup, stocks...)
	mustLoad(t, e, snap, before(snap))
	rng := mrand.New(mrand.NewPCG(25, 3))
	rs := make([]*flashsale.Reservation, groups)
	departure := make([]int, groups)
	for i := range rs {
		departure[i] = rng.IntN(departures)
		rs[i] = newReservation(snap, newID("group"), departure[i]*vehicles, 1, 1+rng.IntN(maxGroup), "")
		rs[i].Choices = vehicles
	}
	results := reserveAll(t, e, rs)
	var active []*flashsale.Reservation
	smallest := make([]int, departures)
	for i := range smallest {
		smallest[i] = maxGroup + 1
	}
	for i, res := range results {
		r := rs[i]
		switch {
		case res.err == nil:
			if r.FirstNight/vehicles != departure[i] {
				t.Errorf("a group of departure %d took unit %d", departure[i], r.FirstNight)
			}
			active = append(active, r)
		case errors.Is(res.err, flashsale.ErrSoldOut):
			smallest[departure[i]] = min(smallest[departure[i]], r.Rooms)
		default:
			t.Fatalf("Reserve(group of %d) = %v", r.Rooms, res.err)
		}
	}
	avail := checkBooks(t, e, snap, stocks, active, maxGroup)
	for d := range departures {
		for v := range vehicles {
			if left := avail[d*vehicles+v]; left >= smallest[d] {
				t.Errorf("departure %d refused a group of %d as sold out with %d seats left in vehicle %d", d, smallest[d], left, v)
			}
		}
	}
	checkOrders(t, e, snap, rs, results)
}
