package funnel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flashsale/flashsale"
)

// The two readiness checks beyond "the dependencies answer": the schema is
// the one this binary was built for, and the stock engine holds every
// current sale.

// schemaReady records the database's pending migrations in r. storeErr is
// the database's ping: while it is down the schema cannot be read, and the
// outage rule (Ready) has already decided.
func schemaReady(r *flashsale.Readiness, pending []string, err, storeErr error) {
	switch {
	case storeErr != nil:
		r.Migrations = "unknown"
	case err != nil:
		r.Ready, r.Migrations, r.MigrationsErr = false, "unknown", err
		r.Reasons = append(r.Reasons, "migrations: cannot read the database's schema_migrations")
	case len(pending) > 0:
		r.Ready, r.Migrations, r.Pending = false, "behind", pending
		r.Reasons = append(r.Reasons, fmt.Sprintf("migrations: %s not applied to the database (run flashsale migrate)", strings.Join(pending, ", ")))
	default:
		r.Migrations = "ok"
	}
}

// unloadedSales returns the current sales (not ended) the stock engine
// does not have. Every sale is loaded when it is created and at start, so
// one missing was lost (the rule the heal loop rebuilds by). The list is
// the database's (through the list cache, so a sale created on another
// instance counts), or this instance's cached sales while the database
// does not answer.
func (s *Service) unloadedSales(ctx context.Context) []string {
	var ids []string
	if sales, err := s.sales.current(ctx); err == nil {
		now := s.now()
		for _, sale := range sales {
			if now.Before(sale.EndsAt) {
				ids = append(ids, sale.ID)
			}
		}
	} else {
		ids = s.sales.live()
	}
	var lost []string
	for _, id := range ids {
		// Any other error is the engine's trouble, which its ping reports.
		if _, err := s.engine.Available(ctx, id); errors.Is(err, flashsale.ErrNotLoaded) {
			lost = append(lost, id)
		}
	}
	return lost
}

// salesReady records in r the current sales the engine lacks. They count
// only while the instance sells from the engine: in db mode the engine is
// rebuilt on the way back.
//
// A lost sale leaves the instance ready: the engine is shared, so every
// instance lacks it at once, and a load balancer taking them all out
// would turn "this sale's purchases wait for the rebuild" into "no
// answers", pages, reads, orders and every other sale included (issue
// 21). The sale's purchases answer 503 with Retry-After meanwhile.
func (s *Service) salesReady(r *flashsale.Readiness, lost []string) {
	if r.Selling != flashsale.SellingEngine || r.EngineErr != nil {
		return
	}
	if len(lost) == 0 {
		r.Sales = "ok"
		return
	}
	r.Sales, r.NotLoaded = "rebuilding", lost
	r.Reasons = append(r.Reasons, fmt.Sprintf("sales: %s being rebuilt in the stock engine (lost or stale; their purchases answer 503 until the fenced rebuild puts them back)", strings.Join(lost, ", ")))
	s.healing.wakeHeal()
}
