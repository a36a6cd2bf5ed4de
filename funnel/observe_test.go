package funnel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/metrics/metricstest"
)

// mustOpenMetrics is the funnel of the embedded shape with the metrics
// wired as cmd/flashsale wires them: the engine wrapped, the observer set.
func mustOpenMetrics(tb testing.TB) (*env, *metrics.Metrics) {
	tb.Helper()
	m := metrics.New(metrics.Config{})
	e := mustOpenAudit(tb, func(e *inmem.Engine) flashsale.StockEngine { return m.Engine(e.Roles()) }, func(cfg *funnel.Config, _ *inmem.Writer) {
		cfg.Store = m.Store(cfg.Store)
		cfg.Observer = m.Funnel()
		cfg.Limiter, cfg.Limits = inmem.NewLimiter(), funnel.Limits{PerUser: flashsale.PerSecond(20, 40)}
	})
	return e, m
}

// TestObserverSteps: each purchase moves the funnel's counters as its
// answer says: one winner is requested, admitted, reserved, written and
// ok; every loser after it is requested and sold_out, and nothing else.
func TestObserverSteps(t *testing.T) {
	e, m := mustOpenMetrics(t)
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 1)
	ctx := context.Background()
	if _, err := e.svc.Purchase(ctx, flashsale.User{ID: "winner"}, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		u := flashsale.User{ID: "loser" + string(rune('a'+i))}
		if _, err := e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID}); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Purchase(ctx, flashsale.User{ID: "x"}, flashsale.PurchaseRequest{SaleID: "NOSUCHSALE"}); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatal(err)
	}
	f := metricstest.Gather(t, m.Registry())
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"flashsale_funnel_steps_total", "step", "requested", 6},
		{"flashsale_funnel_steps_total", "step", "admitted", 1},
		{"flashsale_funnel_steps_total", "step", "reserved", 1},
		{"flashsale_funnel_steps_total", "step", "written", 1},
		{"flashsale_purchases_total", "outcome", "ok", 1},
		{"flashsale_purchases_total", "outcome", "sold_out", 5},
	} {
		if got := f.Value(c.name, "sale", sale.ID, c.label, c.value); got != c.want {
			t.Errorf("%s{sale, %s=%q} = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
	// An unknown sale's ID mints no series of its own.
	if got := f.Value("flashsale_purchases_total", "sale", metrics.OtherSale, "outcome", "not_found"); got != 1 {
		t.Errorf("unknown sale's purchase under sale=other: %v, want 1", got)
	}
	if got := f.Value("flashsale_purchases_total", "sale", "NOSUCHSALE"); got != 0 {
		t.Errorf("unknown sale has series of its own: %v", got)
	}
}

// TestSoldOutAllocs: the sold-out answer allocates nothing with the
// metrics on (BenchmarkSoldOut measures it with them off).
func TestSoldOutAllocs(t *testing.T) {
	e, _ := mustOpenMetrics(t)
	ctx := context.Background()
	u, req := flashsale.User{ID: "loser"}, flashsale.PurchaseRequest{SaleID: mustSellOut(t, e).ID}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := e.svc.Purchase(ctx, u, req); !errors.Is(err, flashsale.ErrSoldOut) {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("sold out with metrics: %v allocs per purchase, want 0", allocs)
	}
}

// BenchmarkSoldOutMetrics is BenchmarkSoldOut with the metrics on.
func BenchmarkSoldOutMetrics(b *testing.B) {
	e, _ := mustOpenMetrics(b)
	u, req := flashsale.User{ID: "loser"}, flashsale.PurchaseRequest{SaleID: mustSellOut(b, e).ID}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Purchase(context.Background(), u, req); !errors.Is(err, flashsale.ErrSoldOut) {
			b.Fatal(err)
		}
	}
}

// mustSellOut is a one-room sale its one room was sold from.
func mustSellOut(tb testing.TB, e *env) *flashsale.Sale {
	tb.Helper()
	sale := e.sale(tb, func(s *flashsale.Sale) { s.PurchaseToken = false }, 1)
	if _, err := e.svc.Purchase(context.Background(), flashsale.User{ID: "winner"}, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		tb.Fatal(err)
	}
	return sale
}
