package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
)

// outcomes records every result each order ID received, from any goroutine.
type outcomes struct {
	mu sync.Mutex
	m  map[string][]error
}

func (o *outcomes) add(id string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string][]error)
	}
	o.m[id] = append(o.m[id], err)
}

// testStorm hammers one sale from many goroutines and then checks the books:
// concurrent batches, redeliveries, key conflicts and limits (phase 1), racing
// pay/expire pairs (phase 2), and racing retakes against new purchases
// (phase 3). After every phase, per night held+sold <= stock and the
// counters equal the rooms of the held and paid orders, and no user is over
// the limit.
func testStorm(t *testing.T, open OpenFunc) {
	const (
		stock     = 100
		users     = 400
		pool      = 800
		workers   = 40
		batches   = 4
		batchSize = 8
	)
	s := open(t)
	sale := mustCreateSale(t, s, newSale("storm", 1, stock, stock))

	// The pool of reservations: picking an ID twice is a redelivery of the
	// same reservation, as a queue would do.
	rng := rand.New(rand.NewPCG(1, 2))
	all := make([]flashsale.Reservation, pool)
	for i := range all {
		first, nights := rng.IntN(2), 1
		if first == 0 && rng.IntN(2) == 0 {
			nights = 2
		}
		key := ""
		if rng.IntN(3) == 0 {
			key = fmt.Sprintf("k%d", rng.IntN(2))
		}
		all[i] = res(fmt.Sprintf("o%04d", i), sale.ID, fmt.Sprintf("u%03d", rng.IntN(users)), key, first, nights, 1)
	}

	// Phase 1: concurrent PlaceOrders.
	var placed outcomes
	storm := func(prefix string, g, batches int, pick func(r *rand.Rand) flashsale.Reservation) {
		r := rand.New(rand.NewPCG(uint64(len(prefix)), uint64(g)))
		for range batches {
			batch := make([]flashsale.Reservation, batchSize)
			for i := range batch {
				batch[i] = pick(r)
			}
			errs, err := s.PlaceOrders(t.Context(), batch)
			if err != nil {
				t.Errorf("PlaceOrders under contention: %v", err)
				return
			}
			if len(errs) != len(batch) {
				t.Errorf("PlaceOrders returned %d results for %d reservations", len(errs), len(batch))
				return
			}
			for i, err := range errs {
				placed.add(batch[i].OrderID, err)
			}
		}
	}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			storm("p1", g, batches, func(r *rand.Rand) flashsale.Reservation { return all[r.IntN(pool)] })
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	orders := checkBooks(t, s, sale, sortedKeys(placed.m))
	checkPlaced(t, &placed, orders)
	soldOut := 0
	for _, errs := range placed.m {
		for _, err := range errs {
			if errors.Is(err, flashsale.ErrSoldOut) {
				soldOut++
			}
		}
	}
	if soldOut == 0 {
		t.Errorf("no reservation was sold out: the storm did not contend for stock")
	}

	// Phase 2: for every held order, pay and expire race; exactly one wins.
	type job struct {
		id       string
		from, to flashsale.OrderStatus
	}
	race := func(jobs []job) map[string][]error {
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
		ch := make(chan job)
		var got outcomes
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for j := range ch {
					_, err := s.Transition(t.Context(), j.id, j.from, j.to, "pay-"+j.id, now)
					got.add(j.id, err)
				}
			})
		}
		for _, j := range jobs {
			ch <- j
		}
		close(ch)
		wg.Wait()
		return got.m
	}
	var jobs []job
	for _, id := range sortedKeys(orders) {
		if orders[id].Status == flashsale.OrderHeld {
			jobs = append(jobs,
				job{id, flashsale.OrderHeld, flashsale.OrderPaid},
				job{id, flashsale.OrderHeld, flashsale.OrderExpired})
		}
	}
	for id, errs := range race(jobs) {
		if won := wins(t, "order "+id+": Transition", errs, flashsale.ErrStale); won != 1 {
			t.Errorf("order %s: %d of 2 racing transitions won, want 1", id, won)
		}
	}
	orders = checkBooks(t, s, sale, sortedKeys(orders))

	// Phase 3: every expired order is retaken twice at once while new users
	// buy the freed rooms.
	jobs = jobs[:0]
	for _, id := range sortedKeys(orders) {
		if orders[id].Status == flashsale.OrderExpired {
			jobs = append(jobs,
				job{id, flashsale.OrderExpired, flashsale.OrderPaid},
				job{id, flashsale.OrderExpired, flashsale.OrderPaid})
		}
	}
	var retaken map[string][]error
	wg.Go(func() { retaken = race(jobs) })
	for g := range 10 {
		wg.Go(func() {
			storm("phase3", g, 3, func(r *rand.Rand) flashsale.Reservation {
				i := r.IntN(300)
				return res(fmt.Sprintf("n%04d", i), sale.ID, fmt.Sprintf("n%03d", i%200), "", i%2, 1, 1)
			})
		})
	}
	wg.Wait()
	orders = checkBooks(t, s, sale, sortedKeys(placed.m))
	checkPlaced(t, &placed, orders)
	for id, errs := range retaken {
		won := wins(t, "order "+id+": retake", errs, flashsale.ErrStale, flashsale.ErrSoldOut)
		want := flashsale.OrderExpired
		if won > 0 {
			want = flashsale.OrderPaid
		}
		if won > 1 {
			t.Errorf("order %s: %d retakes won, want at most 1", id, won)
		}
		if got := orders[id].Status; got != want {
			t.Errorf("order %s: status %s after %d winning retakes, want %s", id, got, won, want)
		}
	}
}

// checkPlaced checks that every order ID got exactly one deciding result
// (anything but ErrDuplicate) and that its stored status agrees with it.
func checkPlaced(t *testing.T, placed *outcomes, orders map[string]*flashsale.Order) {
	t.Helper()
	for _, id := range sortedKeys(placed.m) {
		o, ok := orders[id]
		if !ok {
			t.Errorf("order %s was placed but has no row", id)
			continue
		}
		var decided []error
		for _, err := range placed.m[id] {
			switch {
			case errors.Is(err, flashsale.ErrDuplicate):
			case err == nil, errors.Is(err, flashsale.ErrSoldOut), errors.Is(err, flashsale.ErrLimitExceeded),
				errors.Is(err, flashsale.ErrKeyConflict):
				decided = append(decided, err)
			default:
				t.Errorf("order %s: PlaceOrders result %v", id, err)
			}
		}
		if len(decided) != 1 {
			t.Errorf("order %s: decided %d times (%v), want exactly once", id, len(decided), decided)
			continue
		}
		if decided[0] == nil && o.Status == flashsale.OrderFailed || decided[0] != nil && o.Status != flashsale.OrderFailed {
			t.Errorf("order %s: placed with result %v but stored as %s", id, decided[0], o.Status)
		}
	}
}

// checkBooks reads every order in ids (all orders of the sale) and checks
// the sale's counters against them, the per-user limit, and that Snapshot
// agrees. It returns the orders by ID.
func checkBooks(t *testing.T, s flashsale.Store, sale *flashsale.Sale, ids []string) map[string]*flashsale.Order {
	t.Helper()
	held := make([]int, len(sale.Nights))
	sold := make([]int, len(sale.Nights))
	userRooms := make(map[string]int)
	fresh := make(map[string]*flashsale.Order, len(ids))
	for _, id := range ids {
		o := mustOrder(t, s, id)
		fresh[id] = o
		for i := o.FirstNight; i < o.FirstNight+o.Nights; i++ {
			switch o.Status {
			case flashsale.OrderHeld:
				held[i] += o.Rooms
			case flashsale.OrderPaid:
				sold[i] += o.Rooms
			}
		}
		if o.Status.Active() {
			userRooms[o.UserID] += o.Rooms
		}
	}
	got, err := s.NightStocks(t.Context(), sale.ID)
	if err != nil {
		t.Fatalf("NightStocks: %v", err)
	}
	if len(got) != len(sale.Nights) {
		t.Fatalf("NightStocks returned %d nights, want %d", len(got), len(sale.Nights))
	}
	for i, n := range got {
		if n.Held+n.Sold > n.Stock {
			t.Errorf("night %s oversold: held %d + sold %d > stock %d", n.Date, n.Held, n.Sold, n.Stock)
		}
		if n.Held != held[i] || n.Sold != sold[i] {
			t.Errorf("night %s counters held %d sold %d, but orders hold %d and paid %d", n.Date, n.Held, n.Sold, held[i], sold[i])
		}
		if n.Available != n.Stock-n.Held-n.Sold {
			t.Errorf("night %s available %d, want %d", n.Date, n.Available, n.Stock-n.Held-n.Sold)
		}
	}
	for _, u := range sortedKeys(userRooms) {
		if userRooms[u] > sale.PerUserLimit {
			t.Errorf("user %s has %d active rooms, limit %d", u, userRooms[u], sale.PerUserLimit)
		}
	}
	snap, err := s.Snapshot(t.Context(), sale.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if got, want := len(snap.Reservations), len(fresh); got != want {
		t.Errorf("Snapshot has %d reservations, want %d (one per order)", got, want)
	}
	for _, r := range snap.Reservations {
		o, ok := fresh[r.OrderID]
		if !ok {
			t.Errorf("Snapshot has unknown order %s", r.OrderID)
			continue
		}
		if r.Active != o.Status.Active() {
			t.Errorf("Snapshot order %s active %v, but status %s", r.OrderID, r.Active, o.Status)
		}
	}
	return fresh
}
