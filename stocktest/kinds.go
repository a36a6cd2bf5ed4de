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
