package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

// The operator's side of a sale's life: UpdateSale, AdjustStock,
// SaleChanges, ListSales and SaleOrders. As elsewhere in the suite, the
// tests read the books back (Sale, NightStocks, SaleChanges) rather than
// trusting a returned error: a refused change must have changed nothing.

// change returns a change-log entry of kind at now plus offset.
func change(kind, detail string, offset time.Duration) flashsale.SaleChange {
	return flashsale.SaleChange{At: now.Add(offset + 345678).In(cst), Kind: kind, Detail: detail}
}

// mustSale reads a sale or fails the test.
func mustSale(tb testing.TB, s flashsale.Store, id string) *flashsale.Sale {
	tb.Helper()
	sale, err := s.Sale(tb.Context(), id)
	if err != nil {
		tb.Fatalf("Sale(%s): %v", id, err)
	}
	return sale
}

// checkSale compares the stored sale with want.
func checkSale(tb testing.TB, s flashsale.Store, want *flashsale.Sale) {
	tb.Helper()
	if diff := cmp.Diff(want, mustSale(tb, s, want.ID), msTime); diff != "" {
		tb.Errorf("Sale(%s) mismatch (-want +got):\n%s", want.ID, diff)
	}
}

// checkChanges compares a sale's change log with want, each entry's
// SaleID filled in.
func checkChanges(tb testing.TB, s flashsale.Store, saleID string, want ...flashsale.SaleChange) {
	tb.Helper()
	got, err := s.SaleChanges(tb.Context(), saleID)
	if err != nil {
		tb.Fatalf("SaleChanges(%s): %v", saleID, err)
	}
	if want == nil {
		want = []flashsale.SaleChange{}
	}
	for i := range want {
		want[i].SaleID = saleID
	}
	if diff := cmp.Diff(want, got, msTime); diff != "" {
		tb.Errorf("SaleChanges(%s) mismatch (-want +got):\n%s", saleID, diff)
	}
}

// logged is c as the change log keeps it after the change to rev.
func logged(c flashsale.SaleChange, rev int64) flashsale.SaleChange {
	c.Revision = rev
	return c
}

// edited returns a copy of sale with every field an operator can change
// changed, nights included.
func edited(sale *flashsale.Sale) *flashsale.Sale {
	e := *sale
	e.Title, e.Description, e.Hotel, e.RoomType = "Edited "+sale.Title, "Sea view, breakfast included", "Other Hotel", "Twin"
	e.TimeZone = "Europe/Paris"
	e.Nights = []flashsale.Night{{Date: "2026-12-30", Stock: 9}, {Date: "2026-12-31", Stock: 0}, {Date: "2027-01-01", Stock: 4}}
	e.Price, e.OriginalPrice, e.Currency = 49900, 79900, "USD"
	e.StartsAt, e.EndsAt = sale.StartsAt.Add(time.Hour), sale.EndsAt.Add(2*time.Hour)
	e.PerUserLimit, e.HoldSeconds = sale.PerUserLimit+2, 120
	withRules(&e)
	e.Eligibility.Channels = []string{"members"}
	e.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 1440, AdmitPerSecond: 0.1, AdmissionSeconds: 3600}
	e.PriceTiers = []flashsale.PriceTier{{Rooms: 2, Price: 44900}}
	e.Paused = true
	return &e
}

func testUpdateSale(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5, 6))
		other := mustCreateSale(t, s, newSale("s2", 1, 5))
		want := edited(sale)
		c1 := change(flashsale.ChangeEdit, "title, nights, price", time.Minute)
		if err := s.UpdateSale(t.Context(), want, 0, c1); err != nil {
			t.Fatalf("UpdateSale: %v", err)
		}
		if want.Revision != 1 {
			t.Errorf("UpdateSale left s.Revision = %d, want 1", want.Revision)
		}
		checkSale(t, s, want)
		checkNights(t, s, want, hs{}, hs{}, hs{})
		checkChanges(t, s, "s1", logged(c1, 1))

		// Back to the first shape, from revision 1: revision 2.
		back := *sale
		back.Revision = 0
		c2 := change(flashsale.ChangeEdit, "everything", 2*time.Minute)
		if err := s.UpdateSale(t.Context(), &back, 1, c2); err != nil {
			t.Fatalf("UpdateSale from revision 1: %v", err)
		}
		if back.Revision != 2 {
			t.Errorf("second UpdateSale left s.Revision = %d, want 2", back.Revision)
		}
		checkSale(t, s, &back)
		checkNights(t, s, &back, hs{}, hs{})
		checkChanges(t, s, "s1", logged(c1, 1), logged(c2, 2))
		checkSale(t, s, other)
		checkChanges(t, s, "s2")
	})
	t.Run("ErrStale", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5))
		first := edited(sale)
		c := change(flashsale.ChangeEdit, "title", time.Minute)
		if err := s.UpdateSale(t.Context(), first, 0, c); err != nil {
			t.Fatalf("UpdateSale: %v", err)
		}
		late := *sale
		late.Title = "late"
		if err := s.UpdateSale(t.Context(), &late, 0, change(flashsale.ChangeEdit, "late", 2*time.Minute)); !errors.Is(err, flashsale.ErrStale) {
			t.Errorf("UpdateSale of revision 0 after revision 1 = %v, want ErrStale", err)
		}
		for _, rev := range []int64{2, -1} {
			if err := s.UpdateSale(t.Context(), &late, rev, c); !errors.Is(err, flashsale.ErrStale) {
				t.Errorf("UpdateSale of revision %d at revision 1 = %v, want ErrStale", rev, err)
			}
		}
		checkSale(t, s, first)
		checkChanges(t, s, "s1", logged(c, 1))
	})
	t.Run("WaitingRoom", func(t *testing.T) {
		// One room for another, then none: each edit reads back as written.
		s := open(t)
		sale := newSale("s1", 1, 5)
		withRules(sale)
		mustCreateSale(t, s, sale)
		next := *sale
		for rev, room := range []*flashsale.WaitingRoom{{AdmissionSeconds: 10}, nil} {
			next.WaitingRoom = room
			if err := s.UpdateSale(t.Context(), &next, int64(rev), change(flashsale.ChangeEdit, "waiting_room", time.Minute)); err != nil {
				t.Fatalf("UpdateSale to waiting room %+v: %v", room, err)
			}
			checkSale(t, s, &next)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 1, 5))
		if err := s.UpdateSale(t.Context(), newSale("nope", 1, 5), 0, change(flashsale.ChangeEdit, "", 0)); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("UpdateSale(nope) = %v, want ErrNotFound", err)
		}
		if _, err := s.SaleChanges(t.Context(), "nope"); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("SaleChanges(nope) = %v, want ErrNotFound", err)
		}
		checkChanges(t, s, "s1")
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5))
		const editors = 8
		errs := make([]error, editors)
		edits := make([]*flashsale.Sale, editors)
		var wg sync.WaitGroup
		for i := range editors {
			e := *sale
			e.Title = fmt.Sprintf("editor %d", i)
			edits[i] = &e
			wg.Go(func() { errs[i] = s.UpdateSale(t.Context(), edits[i], 0, change(flashsale.ChangeEdit, e.Title, 0)) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("editors %d and %d both won revision 0", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, flashsale.ErrStale):
				t.Errorf("editor %d: UpdateSale = %v, want nil or ErrStale", i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("no editor won revision 0")
		}
		checkSale(t, s, edits[winner])
		checkChanges(t, s, "s1", logged(change(flashsale.ChangeEdit, edits[winner].Title, 0), 1))
	})
	t.Run("NightsInUse", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5, 5))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 1, 1, 1))
		for _, nights := range [][]flashsale.Night{
			{{Date: "2026-12-24", Stock: 6}, {Date: "2026-12-25", Stock: 5}}, // a stock
			{{Date: "2026-12-24", Stock: 5}},                                 // a night fewer
			{{Date: "2026-12-23", Stock: 5}, {Date: "2026-12-25", Stock: 5}}, // a date
		} {
			e := *sale
			e.Nights = nights
			if err := s.UpdateSale(t.Context(), &e, 0, change(flashsale.ChangeEdit, "nights", 0)); !errors.Is(err, flashsale.ErrStockInUse) {
				t.Errorf("UpdateSale of nights %v with a room held = %v, want ErrStockInUse", nights, err)
			}
		}
		checkSale(t, s, sale)
		checkNights(t, s, sale, hs{}, hs{held: 1})
		checkChanges(t, s, "s1")

		// Sold is in use too; an edit that keeps the nights goes through
		// and leaves the counters alone.
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
		e := *sale
		e.Nights = []flashsale.Night{{Date: "2026-12-24", Stock: 5}, {Date: "2026-12-25", Stock: 4}}
		if err := s.UpdateSale(t.Context(), &e, 0, change(flashsale.ChangeEdit, "nights", 0)); !errors.Is(err, flashsale.ErrStockInUse) {
			t.Errorf("UpdateSale of nights with a room sold = %v, want ErrStockInUse", err)
		}
		e = *sale
		e.Title = "still selling"
		c := change(flashsale.ChangeEdit, "title", time.Minute)
		if err := s.UpdateSale(t.Context(), &e, 0, c); err != nil {
			t.Fatalf("UpdateSale keeping the nights: %v", err)
		}
		checkSale(t, s, &e)
		checkNights(t, s, sale, hs{}, hs{sold: 1})
		checkChanges(t, s, "s1", logged(c, 1))
	})
}

// inUse opens a store with sale s1 of nights (5, 3) in which o1 holds two
// rooms of the first nights nights and o2 bought one room of the first.
func inUse(t *testing.T, open OpenFunc, nights int) (flashsale.Store, *flashsale.Sale) {
	t.Helper()
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 3, 5, 3))
	placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "", 0, nights, 2))
	placeWant(t, s, []error{nil}, res("o2", "s1", "u2", "", 0, 1, 1))
	mustTransition(t, s, "o2", flashsale.OrderHeld, flashsale.OrderPaid, "pay-2")
	return s, sale
}

func testAdjustStock(t *testing.T, open OpenFunc) {
	delta := func(date string, n int) flashsale.StockDelta { return flashsale.StockDelta{Date: date, Delta: n} }
	adjust := func(t *testing.T, s flashsale.Store, d flashsale.StockDelta, c flashsale.SaleChange) *flashsale.NightStock {
		t.Helper()
		got, err := s.AdjustStock(t.Context(), "s1", d, c)
		if err != nil {
			t.Fatalf("AdjustStock(%v): %v", d, err)
		}
		return got
	}
	t.Run("OK", func(t *testing.T) {
		s, sale := inUse(t, open, 1)

		add := change(flashsale.ChangeStock, "2026-12-24 +4", time.Minute)
		if diff := cmp.Diff(&flashsale.NightStock{Date: "2026-12-24", Stock: 9, Available: 6, Held: 2, Sold: 1},
			adjust(t, s, delta("2026-12-24", 4), add)); diff != "" {
			t.Errorf("AdjustStock(+4) mismatch (-want +got):\n%s", diff)
		}
		// Down to exactly held + sold: nothing left to sell, nothing oversold.
		remove := change(flashsale.ChangeStock, "2026-12-24 -6", 2*time.Minute)
		if diff := cmp.Diff(&flashsale.NightStock{Date: "2026-12-24", Stock: 3, Available: 0, Held: 2, Sold: 1},
			adjust(t, s, delta("2026-12-24", -6), remove)); diff != "" {
			t.Errorf("AdjustStock(-6) mismatch (-want +got):\n%s", diff)
		}
		// The other night, to zero.
		zero := change(flashsale.ChangeStock, "2026-12-25 -3", 3*time.Minute)
		if got := adjust(t, s, delta("2026-12-25", -3), zero); got.Stock != 0 || got.Available != 0 {
			t.Errorf("AdjustStock(2026-12-25 -3) = %+v, want stock 0", got)
		}
		sale.Nights[0].Stock, sale.Nights[1].Stock, sale.Revision = 3, 0, 3
		checkSale(t, s, sale)
		checkNights(t, s, sale, hs{held: 2, sold: 1}, hs{})
		checkChanges(t, s, "s1", logged(add, 1), logged(remove, 2), logged(zero, 3))
	})
	t.Run("ErrStockInUse", func(t *testing.T) {
		s, sale := inUse(t, open, 2)
		for _, d := range []flashsale.StockDelta{
			delta("2026-12-24", -3),                                        // 2 unsold and unheld: one too many
			delta("2026-12-24", -5),                                        // every room, the held and sold ones too
			delta("2026-12-25", -2),                                        // 1 unheld
			delta("2026-12-25", flashsale.MaxStock),                        // past MaxStock
			delta("2026-12-24", flashsale.MaxStock-sale.Nights[0].Stock+1), // one past MaxStock
		} {
			if _, err := s.AdjustStock(t.Context(), "s1", d, change(flashsale.ChangeStock, d.String(), 0)); !errors.Is(err, flashsale.ErrStockInUse) {
				t.Errorf("AdjustStock(%v) = %v, want ErrStockInUse", d, err)
			}
		}
		checkSale(t, s, sale)
		checkNights(t, s, sale, hs{held: 2, sold: 1}, hs{held: 2})
		checkChanges(t, s, "s1")

		// Up to MaxStock exactly is allowed.
		up := change(flashsale.ChangeStock, "to the top", 0)
		if got := adjust(t, s, delta("2026-12-24", flashsale.MaxStock-sale.Nights[0].Stock), up); got.Stock != flashsale.MaxStock {
			t.Errorf("AdjustStock to MaxStock = %+v, want stock %d", got, flashsale.MaxStock)
		}
		checkChanges(t, s, "s1", logged(up, 1))
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5))
		for _, tc := range []struct {
			sale string
			d    flashsale.StockDelta
		}{
			{"s1", delta("2026-12-25", 1)},   // the day after the last night
			{"s1", delta("2026-12-23", -1)},  // the day before the first
			{"nope", delta("2026-12-24", 1)}, // no such sale
		} {
			if _, err := s.AdjustStock(t.Context(), tc.sale, tc.d, change(flashsale.ChangeStock, "", 0)); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("AdjustStock(%s, %v) = %v, want ErrNotFound", tc.sale, tc.d, err)
			}
		}
		checkSale(t, s, sale)
		checkChanges(t, s, "s1")
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		s := open(t)
		sale := mustCreateSale(t, s, newSale("s1", 1, 5))
		for _, d := range []flashsale.StockDelta{
			delta("2026-12-24", 0), delta("24.12.2026", 1), delta("", 1),
			delta("2026-12-24", flashsale.MaxStock+1), delta("2026-12-24", -flashsale.MaxStock-1),
		} {
			if _, err := s.AdjustStock(t.Context(), "s1", d, change(flashsale.ChangeStock, "", 0)); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("AdjustStock(%+v) = %v, want an %s error", d, err, flashsale.EInvalid)
			}
		}
		checkSale(t, s, sale)
		checkChanges(t, s, "s1")
	})
}

// testAdjustStorm places orders from many goroutines while others add and
// take away rooms on the same nights, pay and expire holds and edit the
// sale: afterwards no night is oversold, the counters equal the orders
// (I1), each night's stock is its first stock plus the deltas that were
// accepted, and the revision and the change log count every change once.
// No call may fail with anything but its documented refusals: a deadlock
// must be retried inside the store.
func testAdjustStorm(t *testing.T, open OpenFunc) {
	const (
		stock     = 20
		placers   = 12
		batches   = 6
		batchSize = 6
		adjusters = 6
		adjusts   = 25
	)
	s := open(t)
	sale := mustCreateSale(t, s, newSale("storm", 2, stock, stock))
	var (
		mu       sync.Mutex
		placed   outcomes
		accepted = make([]int, len(sale.Nights))
		changes  int64
		refused  int
		held     []string
	)
	var wg sync.WaitGroup
	for g := range placers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(5, uint64(g)))
			for b := range batches {
				batch := make([]flashsale.Reservation, batchSize)
				for i := range batch {
					first := r.IntN(2)
					batch[i] = res(fmt.Sprintf("o%02d-%02d-%d", g, b, i), sale.ID, fmt.Sprintf("u%03d", r.IntN(150)), "",
						first, 1+r.IntN(2-first), 1+r.IntN(2))
				}
				errs, err := s.PlaceOrders(t.Context(), batch)
				if err != nil {
					t.Errorf("PlaceOrders beside AdjustStock: %v", err)
					return
				}
				for i, err := range errs {
					placed.add(batch[i].OrderID, err)
					if err == nil {
						mu.Lock()
						held = append(held, batch[i].OrderID)
						mu.Unlock()
					}
				}
			}
		})
	}
	for g := range adjusters {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(6, uint64(g)))
			for range adjusts {
				night := r.IntN(len(sale.Nights))
				d := flashsale.StockDelta{Date: sale.Nights[night].Date, Delta: r.IntN(11) - 6}
				if d.Delta == 0 {
					d.Delta = 3
				}
				n, err := s.AdjustStock(t.Context(), sale.ID, d, change(flashsale.ChangeStock, d.String(), 0))
				switch {
				case errors.Is(err, flashsale.ErrStockInUse):
					mu.Lock()
					refused++
					mu.Unlock()
				case err != nil:
					t.Errorf("AdjustStock(%v) beside PlaceOrders: %v", d, err)
					return
				case n.Stock < n.Held+n.Sold || n.Available != n.Stock-n.Held-n.Sold:
					t.Errorf("AdjustStock(%v) returned %+v: oversold or miscounted", d, n)
				default:
					mu.Lock()
					accepted[night] += d.Delta
					changes++
					mu.Unlock()
				}
			}
		})
	}
	// Payments and the reaper on the same nights, and an editor on the
	// same sale row, so every lock order the store has meets the others.
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var id string
			if len(held) > 0 {
				id, held = held[len(held)-1], held[:len(held)-1]
			}
			mu.Unlock()
			if id == "" {
				time.Sleep(time.Millisecond) // let the placers hold some
				continue
			}
			to := flashsale.OrderPaid
			if i%3 == 0 {
				to = flashsale.OrderCancelled
			}
			if _, err := s.Transition(t.Context(), id, flashsale.OrderHeld, to, "pay-"+id, now); err != nil && !errors.Is(err, flashsale.ErrStale) {
				t.Errorf("Transition(%s) beside AdjustStock: %v", id, err)
			}
		}
	})
	side.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Holds end 30 s after now: a minute later they are all due.
			if _, err := s.ExpireHolds(t.Context(), now.Add(time.Minute), 4); err != nil {
				t.Errorf("ExpireHolds beside AdjustStock: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond) // a reaper's pace, not a spin

		}
	})
	side.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cur, err := s.Sale(t.Context(), sale.ID)
			if err != nil {
				t.Errorf("Sale: %v", err)
				return
			}
			cur.Title = fmt.Sprintf("edit %d", i)
			switch err := s.UpdateSale(t.Context(), cur, cur.Revision, change(flashsale.ChangeEdit, "title", 0)); {
			case err == nil:
				mu.Lock()
				changes++
				mu.Unlock()
			case !errors.Is(err, flashsale.ErrStale):
				t.Errorf("UpdateSale beside AdjustStock: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond) // an operator's pace, not a spin
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()
	if t.Failed() {
		t.FailNow()
	}

	orders := checkBooks(t, s, sale, sortedKeys(placed.m))
	checkPlaced(t, &placed, orders)
	got, err := s.NightStocks(t.Context(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range got {
		if want := stock + accepted[i]; n.Stock != want {
			t.Errorf("night %s stock %d, want %d (%d + the accepted deltas %+d)", n.Date, n.Stock, want, stock, accepted[i])
		}
	}
	if after := mustSale(t, s, sale.ID); after.Revision != changes {
		t.Errorf("revision %d after %d accepted changes", after.Revision, changes)
	}
	log, err := s.SaleChanges(t.Context(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(log)) != changes {
		t.Errorf("change log has %d entries for %d accepted changes", len(log), changes)
	}
	for i, c := range log {
		if c.Revision != int64(i+1) {
			t.Errorf("change %d has revision %d, want %d (one per change, oldest first)", i, c.Revision, i+1)
			break
		}
	}
	soldOut := 0
	for _, errs := range placed.m {
		for _, err := range errs {
			if errors.Is(err, flashsale.ErrSoldOut) {
				soldOut++
			}
		}
	}
	t.Logf("%d orders, %d sold out; %d changes accepted, %d stock changes refused; stock %v",
		len(placed.m), soldOut, changes, refused, got)
	// The storm must have met both outcomes, or it tested too little.
	if refused == 0 || changes == 0 {
		t.Errorf("AdjustStock: %d accepted, %d refused; the storm did not contend", changes, refused)
	}
}

// statusSales is the ListSales fixture: sales of two hotels in every
// status at now, IDs in creation order, and the engine's units left (the
// sold-out one has none).
func statusSales() (sales []*flashsale.Sale, available map[string][]int) {
	available = map[string][]int{}
	add := func(id, hotel string, starts, ends time.Duration, paused bool, stock int) {
		sale := newSale(id, 1, stock)
		sale.Hotel = hotel
		sale.StartsAt, sale.EndsAt = now.Add(starts), now.Add(ends)
		sale.Paused = paused
		sale.Description = "about " + id
		sales = append(sales, sale)
		available[id] = []int{stock}
	}
	add("s01", "H1", time.Hour, 5*time.Hour, false, 5)      // upcoming
	add("s02", "H2", time.Hour, 5*time.Hour, true, 5)       // upcoming, paused before it starts
	add("s03", "H1", -time.Hour, time.Hour, false, 5)       // active
	add("s04", "H2", -time.Hour, time.Hour, false, 0)       // sold out
	add("s05", "H1", -time.Hour, time.Hour, true, 5)        // paused
	add("s06", "H2", -3*time.Hour, -time.Hour, false, 5)    // ended
	add("s07", "H1", -3*time.Hour, -time.Hour, true, 5)     // ended while paused
	add("s08", "H2", 0, time.Hour, false, 5)                // starts exactly now: active
	add("s09", "H1", -time.Hour, 0, false, 5)               // ends exactly now: ended
	add("s10", "H1", time.Millisecond, time.Hour, false, 5) // starts a millisecond after now: upcoming
	add("s11", "H2", -time.Hour, time.Millisecond, true, 5) // paused, a millisecond left
	return sales, available
}

// newestFirst returns the IDs of sales in descending order.
func newestFirst(sales []*flashsale.Sale) []string {
	var ids []string
	for _, s := range sales {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids
}

func saleIDs(sales []*flashsale.Sale) []string {
	ids := []string{}
	for _, s := range sales {
		ids = append(ids, s.ID)
	}
	return ids
}

func testListSales(t *testing.T, open OpenFunc) {
	t.Run("OK", func(t *testing.T) {
		s := open(t)
		sales, _ := statusSales()
		withRules(sales[2])
		sales[2].Nights = append(sales[2].Nights, flashsale.Night{Date: "2026-12-25", Stock: 7})
		for _, sale := range sales {
			mustCreateSale(t, s, sale)
		}
		// An edit and a stock change, so Revision is read back too.
		if _, err := s.AdjustStock(t.Context(), "s03", flashsale.StockDelta{Date: "2026-12-25", Delta: 2},
			change(flashsale.ChangeStock, "", 0)); err != nil {
			t.Fatal(err)
		}
		sales[2].Nights[1].Stock, sales[2].Revision = 9, 1
		got, err := s.ListSales(t.Context(), flashsale.SaleQuery{Now: now})
		if err != nil {
			t.Fatalf("ListSales: %v", err)
		}
		want := slices.Clone(sales)
		slices.Reverse(want)
		if diff := cmp.Diff(want, got, msTime); diff != "" {
			t.Errorf("ListSales mismatch (-want +got):\n%s", diff)
		}
		// Sales reads the new fields as well.
		running, err := s.Sales(t.Context(), now)
		if err != nil {
			t.Fatal(err)
		}
		for _, sale := range running {
			if sale.ID == "s03" {
				if diff := cmp.Diff(sales[2], sale, msTime); diff != "" {
					t.Errorf("Sales mismatch of s03 (-want +got):\n%s", diff)
				}
			}
		}
	})
	t.Run("Status", func(t *testing.T) {
		s := open(t)
		sales, available := statusSales()
		for _, sale := range sales {
			mustCreateSale(t, s, sale)
		}
		// The store keeps what Sale.Status says, except that it cannot
		// tell active from sold out: for either it returns both.
		group := func(st flashsale.SaleStatus) []flashsale.SaleStatus {
			if st == flashsale.SaleActive || st == flashsale.SaleSoldOut {
				return []flashsale.SaleStatus{flashsale.SaleActive, flashsale.SaleSoldOut}
			}
			return []flashsale.SaleStatus{st}
		}
		for _, st := range []flashsale.SaleStatus{flashsale.SaleUpcoming, flashsale.SaleActive, flashsale.SaleSoldOut,
			flashsale.SalePaused, flashsale.SaleEnded} {
			for _, hotel := range []string{"", "H1", "H2"} {
				var want []*flashsale.Sale
				for _, sale := range sales {
					if slices.Contains(group(st), sale.Status(now, available[sale.ID])) && (hotel == "" || sale.Hotel == hotel) {
						want = append(want, sale)
					}
				}
				got, err := s.ListSales(t.Context(), flashsale.SaleQuery{Status: st, Hotel: hotel, Now: now.In(cst)})
				if err != nil {
					t.Fatalf("ListSales(%s, hotel %q): %v", st, hotel, err)
				}
				if diff := cmp.Diff(newestFirst(want), saleIDs(got)); diff != "" {
					t.Errorf("ListSales(%s, hotel %q) mismatch (-want +got):\n%s", st, hotel, diff)
				}
			}
		}
		got, err := s.ListSales(t.Context(), flashsale.SaleQuery{Hotel: "H3", Now: now})
		if err != nil || len(got) != 0 || got == nil {
			t.Errorf("ListSales(hotel H3) = %v, %v; want an empty list", saleIDs(got), err)
		}
	})
	t.Run("Pages", func(t *testing.T) {
		s := open(t)
		var all []*flashsale.Sale
		for i := range flashsale.PageDefault + 5 {
			sale := newSale(fmt.Sprintf("p%03d", i), 1, 1+i%3)
			sale.Hotel = []string{"H1", "H2"}[i%2]
			all = append(all, mustCreateSale(t, s, sale))
		}
		for _, tc := range []struct {
			hotel string
			limit int
		}{{"", 7}, {"", 1}, {"H2", 4}, {"", flashsale.PageDefault + 5}} {
			var want []*flashsale.Sale
			for _, sale := range all {
				if tc.hotel == "" || sale.Hotel == tc.hotel {
					want = append(want, sale)
				}
			}
			var walked []string
			for before, pages := "", 0; ; pages++ {
				if pages > len(all) {
					t.Fatalf("hotel %q limit %d: the pages never ended", tc.hotel, tc.limit)
				}
				page, err := s.ListSales(t.Context(), flashsale.SaleQuery{Hotel: tc.hotel, Before: before, Limit: tc.limit, Now: now})
				if err != nil {
					t.Fatalf("ListSales: %v", err)
				}
				if len(page) > tc.limit {
					t.Fatalf("a page of %d sales with limit %d", len(page), tc.limit)
				}
				if len(page) == 0 {
					break
				}
				walked = append(walked, saleIDs(page)...)
				before = page[len(page)-1].ID
			}
			if diff := cmp.Diff(newestFirst(want), walked); diff != "" {
				t.Errorf("hotel %q limit %d: the pages walked (-want +got):\n%s", tc.hotel, tc.limit, diff)
			}
		}
		// No limit, or a negative one, is PageDefault; a limit past
		// PageMax is PageMax, never an error.
		for _, limit := range []int{0, -1, flashsale.PageMax + 1} {
			got, err := s.ListSales(t.Context(), flashsale.SaleQuery{Limit: limit, Now: now})
			if err != nil {
				t.Fatalf("ListSales(limit %d): %v", limit, err)
			}
			want := flashsale.PageDefault
			if limit > 0 {
				want = len(all)
			}
			if len(got) != want {
				t.Errorf("ListSales(limit %d) = %d sales, want %d", limit, len(got), want)
			}
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("s1", 1, 5))
		for _, st := range []flashsale.SaleStatus{"bogus", "ACTIVE", "active ", "held"} {
			if _, err := s.ListSales(t.Context(), flashsale.SaleQuery{Status: st, Now: now}); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("ListSales(status %q) = %v, want an %s error", st, err, flashsale.EInvalid)
			}
		}
	})
}

func testSaleOrders(t *testing.T, open OpenFunc) {
	s := open(t)
	mustCreateSale(t, s, newSale("s1", 2, 20, 20))
	mustCreateSale(t, s, newSale("s2", 2, 20))
	mustCreateSale(t, s, newSale("empty", 2, 20))
	var rs []flashsale.Reservation
	for i := range 14 {
		rooms := 1
		if i%5 == 4 {
			rooms = 3 // over the limit: failed
		}
		rs = append(rs, res(fmt.Sprintf("o%02d", i), "s1", fmt.Sprintf("u%02d", i), "", i%2, 1, rooms))
	}
	place(t, s, rs...)
	place(t, s, res("x01", "s2", "u01", "", 0, 1, 1), res("x02", "s2", "u02", "", 0, 1, 1))
	mustTransition(t, s, "o01", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
	mustTransition(t, s, "o06", flashsale.OrderHeld, flashsale.OrderPaid, "pay-6")
	mustTransition(t, s, "o07", flashsale.OrderHeld, flashsale.OrderCancelled, "")
	if _, err := s.ExpireHolds(t.Context(), now.Add(time.Minute), 2); err != nil {
		t.Fatal(err)
	}

	var all []*flashsale.Order
	for i := len(rs) - 1; i >= 0; i-- {
		all = append(all, mustOrder(t, s, rs[i].OrderID))
	}
	byStatus := map[flashsale.OrderStatus][]*flashsale.Order{}
	for _, o := range all {
		byStatus[o.Status] = append(byStatus[o.Status], o)
	}
	for _, st := range statuses {
		if st != flashsale.OrderPending && len(byStatus[st]) == 0 {
			t.Fatalf("the fixture has no %s order", st)
		}
	}

	t.Run("OK", func(t *testing.T) {
		got, err := s.SaleOrders(t.Context(), "s1", flashsale.OrderQuery{})
		if err != nil {
			t.Fatalf("SaleOrders: %v", err)
		}
		if diff := cmp.Diff(all, got, msTime); diff != "" {
			t.Errorf("SaleOrders mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Status", func(t *testing.T) {
		for _, st := range statuses {
			got, err := s.SaleOrders(t.Context(), "s1", flashsale.OrderQuery{Status: st})
			if err != nil {
				t.Fatalf("SaleOrders(%s): %v", st, err)
			}
			want := byStatus[st]
			if want == nil {
				want = []*flashsale.Order{}
			}
			if diff := cmp.Diff(want, got, msTime); diff != "" {
				t.Errorf("SaleOrders(%s) mismatch (-want +got):\n%s", st, diff)
			}
		}
	})
	t.Run("Pages", func(t *testing.T) {
		for _, tc := range []struct {
			status flashsale.OrderStatus
			limit  int
		}{{"", 5}, {"", 1}, {flashsale.OrderHeld, 2}, {"", 0}} {
			want := all
			if tc.status != "" {
				want = byStatus[tc.status]
			}
			var walked []*flashsale.Order
			for before, pages := "", 0; ; pages++ {
				if pages > len(all) {
					t.Fatalf("status %q limit %d: the pages never ended", tc.status, tc.limit)
				}
				page, err := s.SaleOrders(t.Context(), "s1", flashsale.OrderQuery{Status: tc.status, Before: before, Limit: tc.limit})
				if err != nil {
					t.Fatalf("SaleOrders: %v", err)
				}
				if tc.limit > 0 && len(page) > tc.limit {
					t.Fatalf("a page of %d orders with limit %d", len(page), tc.limit)
				}
				if len(page) == 0 {
					break
				}
				walked = append(walked, page...)
				before = page[len(page)-1].ID
			}
			if diff := cmp.Diff(want, walked, msTime); diff != "" {
				t.Errorf("status %q limit %d: the pages walked (-want +got):\n%s", tc.status, tc.limit, diff)
			}
		}
	})
	t.Run("Empty", func(t *testing.T) {
		got, err := s.SaleOrders(t.Context(), "empty", flashsale.OrderQuery{})
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("SaleOrders(empty) = %v, %v; want an empty list", got, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := s.SaleOrders(t.Context(), "nope", flashsale.OrderQuery{}); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("SaleOrders(nope) = %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, st := range []flashsale.OrderStatus{"bogus", "PAID", "active"} {
			if _, err := s.SaleOrders(t.Context(), "s1", flashsale.OrderQuery{Status: st}); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("SaleOrders(status %q) = %v, want an %s error", st, err, flashsale.EInvalid)
			}
		}
	})
}

// testSaleChanges walks a sale through an edit, a pause, a stock change,
// a refused stock change, a resume and a close: the log lists the accepted
// ones, oldest first, each with the revision it made.
func testSaleChanges(t *testing.T, open OpenFunc) {
	s := open(t)
	sale := mustCreateSale(t, s, newSale("s1", 1, 5))
	mustCreateSale(t, s, newSale("s2", 1, 5))
	checkChanges(t, s, "s1")
	var want []flashsale.SaleChange
	update := func(kind string, at time.Duration, edit func(*flashsale.Sale)) {
		t.Helper()
		c := change(kind, kind+" detail", at)
		rev := sale.Revision
		edit(sale)
		if err := s.UpdateSale(t.Context(), sale, rev, c); err != nil {
			t.Fatalf("UpdateSale(%s): %v", kind, err)
		}
		want = append(want, logged(c, sale.Revision))
	}
	update(flashsale.ChangeEdit, time.Minute, func(s *flashsale.Sale) { s.Title = "edited" })
	update(flashsale.ChangePause, 2*time.Minute, func(s *flashsale.Sale) { s.Paused = true })
	c := change(flashsale.ChangeStock, "2026-12-24 +2", 3*time.Minute)
	if _, err := s.AdjustStock(t.Context(), "s1", flashsale.StockDelta{Date: "2026-12-24", Delta: 2}, c); err != nil {
		t.Fatal(err)
	}
	sale.Revision++
	sale.Nights[0].Stock += 2
	want = append(want, logged(c, sale.Revision))
	if _, err := s.AdjustStock(t.Context(), "s1", flashsale.StockDelta{Date: "2026-12-24", Delta: -8}, c); !errors.Is(err, flashsale.ErrStockInUse) {
		t.Errorf("AdjustStock(-8 of 7) = %v, want ErrStockInUse", err)
	}
	update(flashsale.ChangeResume, 4*time.Minute, func(s *flashsale.Sale) { s.Paused = false })
	update(flashsale.ChangeClose, 5*time.Minute, func(s *flashsale.Sale) { s.EndsAt = now.Add(5 * time.Minute) })
	checkChanges(t, s, "s1", want...)
	checkChanges(t, s, "s2")
	checkSale(t, s, sale)
	if sale.Revision != 5 {
		t.Errorf("revision %d after five changes", sale.Revision)
	}
}
