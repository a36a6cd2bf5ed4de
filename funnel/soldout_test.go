package funnel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/metrics/metricstest"
)

// TestRefuseSoldOut: the answer given before a guest is authenticated is
// sold out only when every night of an open sale is, while the engine
// sells; it counts as a sold-out purchase; and a keyed retry, which never
// asks it, still finds its order after the sell-out (I4).
func TestRefuseSoldOut(t *testing.T) {
	e, m := mustOpenMetrics(t)
	ctx := context.Background()
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 1, 1)
	if e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("refused with rooms on both nights")
	}
	first, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "alice-1"})
	if err != nil {
		t.Fatal(err)
	}
	if e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("refused with a room left on the second night")
	}
	if _, err := e.svc.Purchase(ctx, bob, flashsale.PurchaseRequest{SaleID: sale.ID, CheckIn: sale.Nights[1].Date}); err != nil {
		t.Fatal(err)
	}
	if !e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("not refused with every night sold out")
	}
	if e.svc.RefuseSoldOut(ctx, "NOSUCHSALE") {
		t.Fatal("an unknown sale refused sold out")
	}
	again, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: sale.ID, IdempotencyKey: "alice-1"})
	if err != nil || again.ID != first.ID {
		t.Fatalf("keyed retry after the sell-out: %v, %+v; want order %s", err, again, first.ID)
	}

	if _, err := e.svc.PauseSale(ctx, sale.ID, true); err != nil {
		t.Fatal(err)
	}
	if e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("a paused sale refused sold out: it answers paused")
	}
	if _, err := e.svc.PauseSale(ctx, sale.ID, false); err != nil {
		t.Fatal(err)
	}
	if !e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("not refused once resumed")
	}
	f := metricstest.Gather(t, m.Registry())
	if got := f.Value("flashsale_purchases_total", "sale", sale.ID, "outcome", "sold_out"); got != 2 {
		t.Errorf("sold_out purchases counted %v, want the 2 refusals", got)
	}

	e.clock.Advance(2 * time.Hour)
	if e.svc.RefuseSoldOut(ctx, sale.ID) {
		t.Fatal("an ended sale refused sold out: it answers ended")
	}
	if _, err := e.svc.Purchase(ctx, carol, flashsale.PurchaseRequest{SaleID: sale.ID}); !errors.Is(err, flashsale.ErrEnded) {
		t.Fatalf("purchase after the end: %v, want ended", err)
	}
}

// firstNightOut is an engine that knows only its first night sold out, as
// the Redis engine's per-night flags may.
type firstNightOut struct{ flashsale.StockEngine }

func (firstNightOut) SoldOut(saleID string, first, nights int) bool { return first == 0 && nights == 1 }

// TestRefuseSoldOutEveryNight: a sale with one night sold out and rooms on
// another is not refused: a guest may still buy the other night.
func TestRefuseSoldOutEveryNight(t *testing.T) {
	e := mustOpenAudit(t, func(e *inmem.Engine) flashsale.StockEngine { return flashsale.EngineOf(firstNightOut{e.Roles()}) }, nil)
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 1, 1)
	if e.svc.RefuseSoldOut(context.Background(), sale.ID) {
		t.Fatal("refused with the second night not sold out")
	}
}

// TestRefuseSoldOutAllocs: the answer before authentication allocates
// nothing with the metrics on.
func TestRefuseSoldOutAllocs(t *testing.T) {
	e, _ := mustOpenMetrics(t)
	ctx, id := context.Background(), mustSellOut(t, e).ID
	if !e.svc.RefuseSoldOut(ctx, id) {
		t.Fatal("a sold-out sale not refused")
	}
	if allocs := testing.AllocsPerRun(1000, func() { e.svc.RefuseSoldOut(ctx, id) }); allocs != 0 {
		t.Errorf("RefuseSoldOut: %v allocs, want 0", allocs)
	}
}

// BenchmarkRefuseSoldOut is the service's share of the sold-out answer
// given before authentication, with the metrics on.
func BenchmarkRefuseSoldOut(b *testing.B) {
	e, _ := mustOpenMetrics(b)
	ctx, id := context.Background(), mustSellOut(b, e).ID
	b.ReportAllocs()
	for b.Loop() {
		if !e.svc.RefuseSoldOut(ctx, id) {
			b.Fatal("not refused")
		}
	}
}
