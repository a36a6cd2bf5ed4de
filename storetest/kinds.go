package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
)

// Sale kinds (issue 25): a slot sale's units repeat a date, told apart by
// their start, and the stores keep them by index as a stay's nights, so
// every read gives them back in order with their times, and an order
// takes exactly its unit.

// slotSale returns a valid slot sale: three services a day (12:00, 19:00,
// 21:30 in Paris) over two days from testenv's first night, 40 covers
// each, the second day's 19:00 an hour long.
func slotSale(id string) *flashsale.Sale {
	s := fixture.Sale(fixture.ID(id), fixture.Slots(40, 2, "12:00", "19:00", "21:30"), fixture.Zone("Europe/Paris"),
		fixture.Price(69900, 99900), fixture.Limit(4),
		fixture.Window(now.Add(-time.Hour+123456789).In(cst), now.Add(24*time.Hour).In(cst)),
		fixture.Created(now.Add(-2*time.Hour+987654)))
	s.Nights[4].Minutes = 60
	return s
}

func testKinds(t *testing.T, open OpenFunc) {
	t.Run("ReadBack", func(t *testing.T) {
		// Every read gives the slot sale its kind and each unit its date,
		// time and minutes in order; a stay reads back with the kind it
		// was created with ("" or "stay") and neither.
		s := open(t)
		slots := mustCreateSale(t, s, slotSale("s1"))
		plain := mustCreateSale(t, s, fixture.Sale(fixture.ID("s2"), fixture.Stock(5, 5), fixture.OpenAt(now), fixture.Created(now)))
		stay := fixture.Sale(fixture.ID("s3"), fixture.Stock(3), fixture.OpenAt(now), fixture.Created(now))
		stay.Kind = flashsale.KindStay
		mustCreateSale(t, s, stay)

		got := mustSale(t, s, "s1")
		if got.Kind != flashsale.KindSlot || len(got.Nights) != 6 || got.Nights[1].Time != "19:00" || got.Nights[4].Minutes != 60 {
			t.Errorf("Sale(s1) = kind %q, units %+v: want a slot sale's six units", got.Kind, got.Nights)
		}
		for _, want := range []*flashsale.Sale{slots, plain, stay} {
			checkSale(t, s, want)
			checkSnapshotSale(t, s, want)
		}
		for _, n := range mustSale(t, s, "s2").Nights {
			if n.Time != "" || n.Minutes != 0 {
				t.Errorf("a stay's night %s reads back with time %q, minutes %d", n.Date, n.Time, n.Minutes)
			}
		}
		sales, err := s.Sales(t.Context(), now)
		if err != nil {
			t.Fatalf("Sales: %v", err)
		}
		checkListed(t, "Sales", sales, slots, plain, stay)
		list, err := s.ListSales(t.Context(), flashsale.SaleQuery{Now: now})
		if err != nil {
			t.Fatalf("ListSales: %v", err)
		}
		checkListed(t, "ListSales", list, slots, plain, stay)
		checkNights(t, s, slots, make([]hs, 6)...)
	})
	t.Run("PlaceOrders", func(t *testing.T) {
		// An order names its unit by index: it takes that unit's covers,
		// not the other services of its date.
		s := open(t)
		sale := mustCreateSale(t, s, slotSale("s1"))
		placeWant(t, s, []error{nil, nil}, res("o1", "s1", "u1", "k1", 0, 1, 3), res("o2", "s1", "u2", "k2", 4, 1, 2))
		checkNights(t, s, sale, hs{held: 3}, hs{}, hs{}, hs{}, hs{held: 2}, hs{})
		mustTransition(t, s, "o2", flashsale.OrderHeld, flashsale.OrderPaid, "pay-2")
		checkNights(t, s, sale, hs{held: 3}, hs{}, hs{}, hs{}, hs{sold: 2}, hs{})
		if o := mustOrder(t, s, "o2"); o.FirstNight != 4 || o.CheckIn != sale.Nights[4].Date || o.Slot != sale.SlotName(4) {
			t.Errorf("Order(o2) = first night %d, check-in %q, slot %q, want 4, %q, %q", o.FirstNight, o.CheckIn, o.Slot, sale.Nights[4].Date, sale.SlotName(4))
		}
		checkSnapshotSale(t, s, sale)
	})
	t.Run("UpdateSale", func(t *testing.T) {
		// An edit that leaves the units alone keeps them and their covers
		// taken; a slot moved to another time is another unit for whoever
		// booked, refused while any is, and written once none is.
		s := open(t)
		sale := mustCreateSale(t, s, slotSale("s1"))
		placeWant(t, s, []error{nil}, res("o1", "s1", "u1", "k1", 1, 1, 2))

		e := *sale
		e.Nights = append([]flashsale.Night(nil), sale.Nights...)
		e.Price = 59900
		if err := s.UpdateSale(t.Context(), &e, 0, change(flashsale.ChangeEdit, "price", time.Minute)); err != nil {
			t.Fatalf("UpdateSale of the price: %v", err)
		}
		checkSale(t, s, &e)
		checkSnapshotSale(t, s, &e)
		checkNights(t, s, &e, hs{}, hs{held: 2}, hs{}, hs{}, hs{}, hs{})

		moved := e
		moved.Nights = append([]flashsale.Night(nil), e.Nights...)
		moved.Nights[1].Time = "19:30"
		if err := s.UpdateSale(t.Context(), &moved, 1, change(flashsale.ChangeEdit, "moved", 2*time.Minute)); !errors.Is(err, flashsale.ErrStockInUse) {
			t.Fatalf("UpdateSale moving a slot with covers held = %v, want ErrStockInUse", err)
		}
		checkSale(t, s, &e)

		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderCancelled, "")
		moved.Nights[5].Minutes = 90
		if err := s.UpdateSale(t.Context(), &moved, 1, change(flashsale.ChangeEdit, "moved", 3*time.Minute)); err != nil {
			t.Fatalf("UpdateSale moving a slot with none held: %v", err)
		}
		checkSale(t, s, &moved)
		checkNights(t, s, &moved, make([]hs, 6)...)
	})
	t.Run("AdjustStock", func(t *testing.T) {
		// A slot is named by its date and time: the delta changes that
		// unit alone; a date without a time names no unit of a slot sale
		// (a stay's nights have no time), and nothing changes.
		s := open(t)
		sale := mustCreateSale(t, s, slotSale("s1"))
		_, err := s.AdjustStock(t.Context(), "s1", flashsale.StockDelta{Date: sale.Nights[0].Date, Delta: 5},
			change(flashsale.ChangeStock, "+5", time.Minute))
		if !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("AdjustStock on a slot sale's date without a time = %v, want ErrNotFound", err)
		}
		checkNights(t, s, sale, make([]hs, 6)...)
		checkSale(t, s, sale)
		n, err := s.AdjustStock(t.Context(), "s1", flashsale.StockDelta{Date: sale.Nights[1].Date, Time: sale.Nights[1].Time, Delta: 5},
			change(flashsale.ChangeStock, "+5", 2*time.Minute))
		if err != nil || n.Stock != sale.Nights[1].Stock+5 {
			t.Fatalf("AdjustStock of slot 1 = %+v, %v, want its stock +5", n, err)
		}
		ns, err := s.NightStocks(t.Context(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		for i, got := range ns {
			want := sale.Nights[i].Stock
			if i == 1 {
				want += 5
			}
			if got.Stock != want {
				t.Errorf("unit %d stock %d after adjusting unit 1, want %d", i, got.Stock, want)
			}
		}
	})
}
