package funnel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// BenchmarkSoldOut is the answer a flash sale gives most, below HTTP: a
// purchase of a sold-out stay, answered from the engine's flag without
// I/O, a token or a limiter's count.
func BenchmarkSoldOut(b *testing.B) {
	e := mustOpenAudit(b, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		cfg.Limiter, cfg.Limits = inmem.NewLimiter(), funnel.Limits{PerUser: flashsale.PerSecond(20, 40)}
	})
	sale := e.sale(b, func(s *flashsale.Sale) { s.PurchaseToken = false }, 1)
	if _, err := e.svc.Purchase(context.Background(), flashsale.User{ID: "winner"}, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		b.Fatal(err)
	}
	u := flashsale.User{ID: "loser"}
	req := flashsale.PurchaseRequest{SaleID: sale.ID}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Purchase(context.Background(), u, req); !errors.Is(err, flashsale.ErrSoldOut) {
			b.Fatal(err)
		}
	}
}

// BenchmarkRateLimited is a script past its per-user rate on a sale that
// still has rooms: refused by the in-process limiter before any I/O.
func BenchmarkRateLimited(b *testing.B) {
	e := mustOpenAudit(b, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		cfg.Limiter, cfg.Limits = inmem.NewLimiter(), funnel.Limits{PerUser: flashsale.Rate{N: 1, Per: time.Hour, Burst: 1}}
	})
	sale := e.sale(b, func(s *flashsale.Sale) { s.PurchaseToken = false; s.PerUserLimit = 1000 }, 1000)
	u := flashsale.User{ID: "script"}
	req := flashsale.PurchaseRequest{SaleID: sale.ID, ClientIP: "203.0.113.7"}
	if _, err := e.svc.Purchase(context.Background(), u, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.svc.Purchase(context.Background(), u, req); flashsale.ErrorCode(err) != flashsale.ERateLimited {
			b.Fatal(err)
		}
	}
}
