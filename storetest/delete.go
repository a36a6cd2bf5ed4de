package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// testDeleteSale: a test sale goes with everything of it, in one step; a
// real sale is refused and keeps everything.
func testDeleteSale(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	real := mustCreateSale(t, s, newSale("real", 2, 5))
	test := newSale("load-test", 2, 5)
	test.Test = true
	mustCreateSale(t, s, test)
	if got := mustSale(t, s, test.ID); !got.Test {
		t.Fatal("Sale(test sale).Test = false: the column did not round-trip")
	}
	for _, sale := range []*flashsale.Sale{real, test} {
		placeWant(t, s, []error{nil, nil}, res(sale.ID+"-o1", sale.ID, "alice", "k1", 0, 1, 1), res(sale.ID+"-o2", sale.ID, "bob", "", 0, 1, 2))
		if _, err := s.Transition(ctx, sale.ID+"-o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1", now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AdjustStock(ctx, sale.ID, flashsale.StockDelta{Date: sale.Nights[0].Date, Delta: 1}, change(flashsale.ChangeStock, "+1", 0)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sale := range []*flashsale.Sale{real, test} { // a waiting room's records
		if err := s.Queues.RecordPlaces(ctx, sale.ID, []flashsale.PlaceRecord{{UserID: "alice", Ticket: "T1", JoinedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	ns, ok, err := s.ClaimNotices(ctx, "webhook", "owner", time.Now().Add(time.Minute), 100)
	if err != nil || !ok {
		t.Fatalf("ClaimNotices: %v %v", ok, err)
	}
	var ds []flashsale.Delivery
	for _, n := range ns {
		ds = append(ds, flashsale.Delivery{Transport: "webhook", NoticeID: n.ID, Seq: n.Seq, Type: n.Type, Attempt: 1, At: now, OK: true})
	}
	if err := s.RecordDeliveries(ctx, ds); err != nil {
		t.Fatal(err)
	}

	if err := s.DeleteSale(ctx, real.ID); !errors.Is(err, flashsale.ErrNotTestSale) {
		t.Fatalf("DeleteSale(real sale) = %v, want ErrNotTestSale", err)
	}
	if err := s.DeleteSale(ctx, test.ID); err != nil {
		t.Fatalf("DeleteSale(test sale): %v", err)
	}
	if _, err := s.Sale(ctx, test.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("Sale(deleted) = %v, want ErrNotFound", err)
	}
	for _, id := range []string{test.ID + "-o1", test.ID + "-o2"} {
		if _, err := s.Order(ctx, id); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Order(%s of the deleted sale) = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.OrderByKey(ctx, test.ID, "alice", "k1"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("OrderByKey(deleted sale) = %v, want ErrNotFound", err)
	}
	if _, err := s.SaleChanges(ctx, test.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("SaleChanges(deleted) = %v, want ErrNotFound", err)
	}
	for _, n := range ns {
		ds, err := s.Deliveries(ctx, flashsale.DeliveryQuery{NoticeID: n.ID})
		if err != nil {
			t.Fatal(err)
		}
		if gone := n.SaleID == test.ID; gone != (len(ds) == 0) {
			t.Errorf("event %s of sale %s: %d deliveries left", n.ID, n.SaleID, len(ds))
		}
	}
	if _, places, err := s.Queues.QueueRecord(ctx, test.ID); err != nil || len(places) != 0 {
		t.Errorf("QueueRecord(deleted) = %d places, %v; want none", len(places), err)
	}
	if _, places, err := s.Queues.QueueRecord(ctx, real.ID); err != nil || len(places) != 1 {
		t.Errorf("QueueRecord(the real sale) = %d places, %v; want its one", len(places), err)
	}
	// The real sale keeps everything: its orders, its events, its book.
	for _, id := range []string{real.ID + "-o1", real.ID + "-o2"} {
		if _, err := s.Order(ctx, id); err != nil {
			t.Errorf("Order(%s of the real sale): %v", id, err)
		}
	}
	if nights, err := s.NightStocks(ctx, real.ID); err != nil || nights[0].Stock != 6 || nights[0].Held+nights[0].Sold != 3 {
		t.Errorf("real sale's night = %+v, %v", nights, err)
	}
	if cs, err := s.SaleChanges(ctx, real.ID); err != nil || len(cs) != 1 {
		t.Errorf("real sale's changes = %+v, %v", cs, err)
	}
	if err := s.DeleteSale(ctx, test.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("DeleteSale twice = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSale(ctx, "no-such-sale"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("DeleteSale(unknown) = %v, want ErrNotFound", err)
	}
	// The test sale's user counters went with it: the same user buys again
	// in a new test sale of the same ID.
	again := newSale("load-test", 2, 5)
	again.Test = true
	mustCreateSale(t, s, again)
	placeWant(t, s, []error{nil}, res("again-o1", again.ID, "bob", "", 0, 1, 2))
}
