package funnel_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
)

// slots makes a slot sale's units: each day, each start, capacity each.
func slots(days int, starts []string, minutes, capacity int) []flashsale.Night {
	var ns []flashsale.Night
	for d := range days {
		for _, at := range starts {
			ns = append(ns, flashsale.Night{Date: testenv.Night(d), Time: at, Minutes: minutes, Stock: capacity})
		}
	}
	return ns
}

// TestSlotSales: a restaurant (three services a day over two days, 40
// covers each, tables of 1 to 6) and a spa (appointments every 30
// minutes, 3 therapists, one place each) each sell out exactly under a
// storm of guests buying random slots at once, on each engine: every slot
// sells its capacity and no more, a table is never split, every refusal
// is sold_out, and the audit balances.
func TestSlotSales(t *testing.T) {
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			e := mustOpenAudit(t, func(*inmem.Engine) flashsale.StockEngine { return eng.open(t) }, nil)
			t.Run("Restaurant", func(t *testing.T) {
				stormSlots(t, e, slots(2, []string{"12:00", "19:00", "21:30"}, 0, 40), 6, 900)
			})
			t.Run("Spa", func(t *testing.T) {
				starts := []string{"09:00", "09:30", "10:00", "10:30", "11:00", "11:30", "12:00", "12:30"}
				stormSlots(t, e, slots(1, starts, 60, 3), 1, 120)
			})
		})
	}
}

func stormSlots(t *testing.T, e *env, units []flashsale.Night, maxParty, guests int) {
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) {
		s.Kind, s.TimeZone, s.Nights = flashsale.KindSlot, "Europe/Paris", units
		s.PurchaseToken, s.PerUserLimit = false, maxParty
	})
	type bought struct {
		unit, party int
	}
	var (
		mu   sync.Mutex
		sold []bought
		errs = map[string]int{}
	)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range guests {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(g), 25))
			unit := rng.IntN(len(units))
			party := 1 + rng.IntN(maxParty)
			u := flashsale.User{ID: fmt.Sprintf("guest-%d", g), Tier: flashsale.TierGold}
			<-start
			var o *flashsale.Order
			var err error
			for try := 0; ; try++ {
				// A guest told the instance is busy retries, as the page does.
				o, err = e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Slot: s.SlotName(unit), Rooms: party})
				if flashsale.ErrorCode(err) != flashsale.EUnavailable || try == 200 {
					break
				}
				time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if o.FirstNight != unit || o.Rooms != party || o.Nights != 1 {
					t.Errorf("order %+v for slot %d, party %d", o, unit, party)
				}
				sold = append(sold, bought{unit, party})
			case errors.Is(err, flashsale.ErrSoldOut):
				errs["sold_out"]++
			default:
				errs[err.Error()]++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 1 || (len(errs) == 1 && errs["sold_out"] == 0) {
		t.Fatalf("refusals other than sold_out: %v", errs)
	}
	// The places a party did not fit go to guests of one, until every
	// slot is sold out: then exactly its capacity is sold.
	for i := range units {
		for n := 0; ; n++ {
			u := flashsale.User{ID: fmt.Sprintf("last-%d-%d", i, n), Tier: flashsale.TierGold}
			_, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Slot: s.SlotName(i), Rooms: 1})
			if errors.Is(err, flashsale.ErrSoldOut) {
				break
			}
			if err != nil || n > units[i].Stock {
				t.Fatalf("slot %s after the storm: %v (%d single places bought)", s.SlotName(i), err, n)
			}
			sold = append(sold, bought{i, 1})
		}
	}
	taken := make([]int, len(units))
	for _, b := range sold {
		taken[b.unit] += b.party
	}
	ns, err := e.store.NightStocks(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range ns {
		if taken[i] != units[i].Stock || n.Held != taken[i] || n.Available != 0 {
			t.Errorf("slot %s: %d taken by the accepted orders, database %+v, capacity %d", s.SlotName(i), taken[i], n, units[i].Stock)
		}
	}
	if a := e.audit(t, s.ID); !a.Balanced() {
		t.Errorf("audit after the storm: %+v", a.Findings)
	}
	v, err := e.svc.PublicSale(ctx, s.ID)
	if err != nil || v.Sale.KindOf() != flashsale.KindSlot || len(v.Nights) != len(units) || v.Nights[0].Time != units[0].Time {
		t.Fatalf("public view of the slot sale: %+v, %v", v, err)
	}
}

// TestSlotPurchase: a slot sale's purchase names its slot, in the
// venue's zone, and nothing of a stay's; a stay's purchase names no slot.
func TestSlotPurchase(t *testing.T) {
	e := mustOpen(t)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.Kind, s.TimeZone, s.Nights = flashsale.KindSlot, "Asia/Tokyo", slots(1, []string{"18:00", "20:00"}, 90, 4)
		s.PurchaseToken, s.PerUserLimit = false, 4
	})
	stay := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 3)
	ctx := context.Background()
	for _, c := range []struct {
		sale *flashsale.Sale
		req  flashsale.PurchaseRequest
		want string // a fragment of the error, "" success
	}{
		{s, flashsale.PurchaseRequest{}, "slot is required"},
		{s, flashsale.PurchaseRequest{Slot: testenv.Night(0) + "T19:00"}, "not a slot of this sale"},
		{s, flashsale.PurchaseRequest{Slot: testenv.Night(0) + "T20:00", CheckIn: testenv.Night(0)}, "without check_in"},
		{s, flashsale.PurchaseRequest{Slot: testenv.Night(0) + "T20:00", Rooms: 5}, "limit"},
		{s, flashsale.PurchaseRequest{Slot: testenv.Night(0) + "T20:00", Rooms: 4}, ""},
		{stay, flashsale.PurchaseRequest{Slot: testenv.Night(0) + "T20:00"}, "are for slot and seats sales"},
	} {
		c.req.SaleID = c.sale.ID
		o, err := e.svc.Purchase(ctx, alice, c.req)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.req, err)
		case c.want == "" && (o.FirstNight != 1 || o.Rooms != 4 || o.Slot != testenv.Night(0)+"T20:00"):
			t.Errorf("%+v: order %+v, want 4 places of unit 1", c.req, o)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v = %v, want an error with %q", c.req, err, c.want)
		}
	}
	v, err := e.svc.PublicSale(ctx, s.ID)
	if err != nil || len(v.Nights) != 2 || v.Nights[1].Time != "20:00" || v.Nights[1].Available != 0 {
		t.Fatalf("public view %+v, %v", v, err)
	}
	// The operator adds places to one slot, named by its date and time.
	if _, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: testenv.Night(0), Delta: 2}); err == nil {
		t.Error("a slot sale's stock change without a time was accepted")
	}
	if _, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: testenv.Night(0), Time: "20:00", Delta: 2}); err != nil {
		t.Fatalf("adding 2 places to the 20:00 slot: %v", err)
	}
	if n := e.nights(t, s.ID); n[0].Stock != 4 || n[1].Stock != 6 || n[1].Available != 2 {
		t.Fatalf("after adding to 20:00: %+v", n)
	}
	if _, err := e.svc.Purchase(ctx, bob, flashsale.PurchaseRequest{SaleID: s.ID, Slot: testenv.Night(0) + "T20:00", Rooms: 2}); err != nil {
		t.Fatalf("buying the added places: %v", err)
	}
}

// shuttle makes a seats sale's units: each departure, vehicles units of
// seats each, one after another.
func shuttle(departures []string, vehicles, seats int) []flashsale.Night {
	var ns []flashsale.Night
	for _, at := range departures {
		for range vehicles {
			ns = append(ns, flashsale.Night{Date: testenv.Night(0), Time: at, Minutes: 45, Stock: seats})
		}
	}
	return ns
}

// TestShuttleSale: an airport shuttle of 4 departures, 2 vehicles x 8
// seats, groups of 1 to 5 kept together, sells out exactly under a storm
// on each engine: no vehicle oversold, every group in one vehicle of its
// own departure, refusals only sold_out, a group refused only when no
// vehicle of its departure had its seats, and the audit balanced; the
// seats left then sell to groups of one, to the last.
func TestShuttleSale(t *testing.T) {
	departures := []string{"09:00", "09:30", "10:00", "10:30"}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			ctx := context.Background()
			e := mustOpenAudit(t, func(*inmem.Engine) flashsale.StockEngine { return eng.open(t) }, nil)
			units := shuttle(departures, 2, 8)
			s := e.sale(t, func(s *flashsale.Sale) {
				s.Kind, s.TimeZone, s.Nights = flashsale.KindSeats, "Asia/Shanghai", units
				s.PurchaseToken, s.PerUserLimit = false, 5
			})
			type group struct{ departure, seats, unit int }
			var (
				mu       sync.Mutex
				taken    []group
				smallest = map[int]int{}
			)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := range 400 {
				wg.Go(func() {
					rng := mrand.New(mrand.NewPCG(uint64(g), 26))
					d, seats := rng.IntN(len(departures)), 1+rng.IntN(5)
					u := flashsale.User{ID: fmt.Sprintf("group-%d", g), Tier: flashsale.TierGold}
					<-start
					var o *flashsale.Order
					var err error
					for try := 0; ; try++ {
						o, err = e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Slot: testenv.Night(0) + "T" + departures[d], Rooms: seats})
						if flashsale.ErrorCode(err) != flashsale.EUnavailable || try == 200 {
							break
						}
						time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
					}
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						if o.FirstNight/2 != d || o.Rooms != seats || o.Slot != testenv.Night(0)+"T"+departures[d] {
							t.Errorf("group of %d for departure %d got %+v", seats, d, o)
						}
						taken = append(taken, group{d, seats, o.FirstNight})
					case errors.Is(err, flashsale.ErrSoldOut):
						if v, ok := smallest[d]; !ok || seats < v {
							smallest[d] = seats
						}
					default:
						t.Errorf("group of %d: %v", seats, err)
					}
				})
			}
			close(start)
			wg.Wait()
			used := make([]int, len(units))
			for _, g := range taken {
				used[g.unit] += g.seats
			}
			ns, err := e.store.NightStocks(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, n := range ns {
				if used[i] > 8 || n.Held != used[i] {
					t.Errorf("vehicle %d of departure %d: %d seats taken by the groups, database %+v", i%2, i/2, used[i], n)
				}
				if v, ok := smallest[i/2]; ok && 8-used[i] >= v {
					t.Errorf("departure %d refused a group of %d with %d seats left in vehicle %d", i/2, v, 8-used[i], i%2)
				}
			}
			for d := range departures {
				for n := 0; ; n++ {
					u := flashsale.User{ID: fmt.Sprintf("last-%d-%d", d, n), Tier: flashsale.TierGold}
					_, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Slot: testenv.Night(0) + "T" + departures[d], Rooms: 1})
					if errors.Is(err, flashsale.ErrSoldOut) {
						break
					}
					if err != nil || n > 16 {
						t.Fatalf("departure %d after the storm: %v", d, err)
					}
				}
			}
			ns, _ = e.store.NightStocks(ctx, s.ID)
			for i, n := range ns {
				if n.Available != 0 || n.Held != 8 {
					t.Errorf("vehicle %d after the last seat: %+v", i, n)
				}
			}
			if a := e.audit(t, s.ID); !a.Balanced() {
				t.Errorf("audit: %+v", a.Findings)
			}
		})
	}
}

// TestShuttleRetry: a group's retry with its idempotency key gets the
// order its first attempt made, though the engine put it in the second
// vehicle; the same key for another departure is refused.
func TestShuttleRetry(t *testing.T) {
	ctx := context.Background()
	e := mustOpen(t)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.Kind, s.TimeZone, s.Nights = flashsale.KindSeats, "UTC", shuttle([]string{"09:00", "09:30"}, 2, 4)
		s.PurchaseToken, s.PerUserLimit = false, 4
	})
	dep := testenv.Night(0) + "T09:00"
	if _, err := e.svc.Purchase(ctx, bob, flashsale.PurchaseRequest{SaleID: s.ID, Slot: dep, Rooms: 3}); err != nil {
		t.Fatal(err)
	}
	req := flashsale.PurchaseRequest{SaleID: s.ID, Slot: dep, Rooms: 3, IdempotencyKey: "k1"}
	o, err := e.svc.Purchase(ctx, alice, req)
	if err != nil || o.FirstNight != 1 {
		t.Fatalf("a group of 3 with 1 seat left in the first vehicle = %+v, %v, want the second vehicle", o, err)
	}
	again, err := e.svc.Purchase(ctx, alice, req)
	if err != nil || again.ID != o.ID {
		t.Fatalf("the retry = %+v, %v, want order %s", again, err, o.ID)
	}
	req.Slot = testenv.Night(0) + "T09:30"
	if _, err := e.svc.Purchase(ctx, alice, req); !errors.Is(err, flashsale.ErrKeyReused) {
		t.Fatalf("the key for another departure = %v, want ErrKeyReused", err)
	}
	carol := flashsale.User{ID: "carol", Tier: flashsale.TierGold}
	if _, err := e.svc.Purchase(ctx, carol, flashsale.PurchaseRequest{SaleID: s.ID, Slot: dep, Rooms: 2}); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("a group of 2 with 1 seat in each vehicle: %v, want sold out: a group is never split", err)
	}
	if o, err := e.svc.Purchase(ctx, carol, flashsale.PurchaseRequest{SaleID: s.ID, Slot: dep, Rooms: 1}); err != nil || o.FirstNight != 0 {
		t.Fatalf("one seat: %+v, %v, want the first vehicle's last", o, err)
	}
}
