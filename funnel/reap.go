package funnel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// ReapWorkersDefault is how many expired holds one instance releases in the
// engine at once. The database expires a whole batch in one transaction,
// but each engine release is its own round trip (and, with Redis, a network
// one) followed by a database read: one at a time, a batch of a few hundred
// would take longer than the second I5 allows.
const ReapWorkersDefault = 8

// reapLoop releases expired holds. It polls the database, the truth for
// holds, so it needs no timers to rebuild after a restart and any number of
// instances can run it: the store expires each hold exactly once, in
// whichever instance's batch takes it first.
func (s *Service) reapLoop(ctx context.Context) {
	defer s.done.Done()
	// A reap under way finishes even when Close comes: the holds it expired
	// in the database must be released in the engine too.
	every(ctx, s.reapInt, nil, func(ctx context.Context) { s.Reap(context.WithoutCancel(ctx)) })
}

// Reap expires every hold ended by now and returns how many it expired.
// The store expires up to ReapBatchDefault holds per transaction (one
// transaction per hold would queue each on the night's counter row behind
// the order writer's batches); the orders it returns are then released in
// the engine by ReapWorkersDefault goroutines. It stops when a batch comes
// back short, as then no due hold was left.
func (s *Service) Reap(ctx context.Context) int {
	expired := 0
	for ctx.Err() == nil {
		orders, err := s.store.ExpireHolds(ctx, s.now(), ReapBatchDefault)
		if err != nil {
			s.log.Error("expire holds", "err", err)
			break
		}
		for _, o := range orders {
			s.log.Info("order expired", "sale_id", o.SaleID, "order_id", o.ID)
		}
		s.releaseAll(ctx, orders)
		expired += len(orders)
		if len(orders) < ReapBatchDefault {
			break
		}
	}
	return expired
}

// releaseAll releases orders the database already expired in the engine,
// ReapWorkersDefault at a time. Each goes through release, whose recheck
// keeps a payment that raced the expiry counted.
func (s *Service) releaseAll(ctx context.Context, orders []*flashsale.Order) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(ReapWorkersDefault, len(orders)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(orders) {
					return
				}
				s.release(ctx, orders[i])
				s.obs.HoldReleased(orders[i].SaleID, s.now().Sub(orders[i].HoldExpiresAt))
			}
		})
	}
	wg.Wait()
}
