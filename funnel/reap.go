package funnel

import (
	"context"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// ReapWorkersDefault is how many expired holds one instance releases in the
// engine at once. The database expires a whole batch in one transaction,
// but each engine release is its own round trip (and, with Redis, a network
// one) followed by a database read: one at a time, a batch of a few hundred
// would take longer than the second I5 allows.
const ReapWorkersDefault = 8

// reaper releases expired holds. It polls the database, the truth for
// holds, so it needs no timers to rebuild after a restart and any number of
// instances can run it: the store expires each hold exactly once, in
// whichever instance's batch takes it first. Its goroutines are run's and
// one reap's releasers; it has no lock of its own.
type reaper struct {
	*parts
	interval time.Duration // Config.ReapInterval
}

// run reaps every interval until ctx ends. A reap under way finishes even
// then: the holds it expired in the database must be released in the
// engine too.
func (r *reaper) run(ctx context.Context) {
	every(ctx, r.interval, nil, func(ctx context.Context) { r.reap(context.WithoutCancel(ctx)) })
}

// Reap expires every hold ended by now (see reaper.reap).
func (s *Service) Reap(ctx context.Context) int { return s.reaper.reap(ctx) }

// reap expires every hold ended by now and returns how many it expired,
// once every one of them is released in the engine too.
//
// The store expires up to ReapBatchDefault holds per transaction (one
// transaction per hold would queue each on the night's counter row behind
// the order writer's batches); ReapWorkersDefault goroutines release them
// in the engine meanwhile. The database expiry does not wait for those
// releases: I5 counts from a hold's end to its expiry in the database, and
// holds ending while a batch of several hundred is released would
// otherwise wait for all of it. So a full batch is followed by the next at
// once, and after a short one Reap looks again every reap interval for as
// long as releases are still running. An error or the end of ctx stops the
// looking, not the releases already due.
func (rp *reaper) reap(ctx context.Context) int {
	r := &releaser{p: rp.parts, ctx: ctx}
	expired := 0
	for ctx.Err() == nil {
		orders, err := rp.store.ExpireHolds(ctx, rp.now(), ReapBatchDefault)
		if err != nil {
			rp.log.Error("expire holds", "err", err)
			break
		}
		for _, o := range orders {
			rp.log.Info("order expired", "sale_id", o.SaleID, "order_id", o.ID)
		}
		r.add(orders)
		expired += len(orders)
		if len(orders) < ReapBatchDefault && !r.running(rp.interval) {
			break
		}
	}
	r.wg.Wait()
	return expired
}

// releaser releases the orders one Reap expired in the engine, at most
// ReapWorkersDefault at a time, while that Reap goes on expiring. Each
// goes through release, whose recheck keeps a payment that raced the
// expiry counted.
type releaser struct {
	p   *parts
	ctx context.Context
	wg  sync.WaitGroup // the workers

	mu      sync.Mutex
	todo    []*flashsale.Order // expired, not yet taken by a worker
	left    int                // expired, not yet released
	workers int
	idle    chan struct{} // closed when left drops to 0; nil while it is 0
}

// add queues orders for release, starting workers up to the bound; it
// never waits for one.
func (r *releaser) add(orders []*flashsale.Order) {
	if len(orders) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	r.todo = append(r.todo, orders...)
	r.left += len(orders)
	// Each worker is releasing an order or about to take one from todo,
	// so while workers < left some order has no worker of its own yet.
	for r.workers < min(ReapWorkersDefault, r.left) {
		r.workers++
		r.wg.Go(r.work)
	}
}

// work releases queued orders until none is left.
func (r *releaser) work() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.todo) > 0 {
		o := r.todo[0]
		r.todo[0], r.todo = nil, r.todo[1:]
		r.mu.Unlock()
		r.p.release(r.ctx, o)
		r.p.obs.HoldReleased(o.SaleID, r.p.now().Sub(o.HoldExpiresAt))
		r.mu.Lock()
		r.left--
		if r.left == 0 {
			close(r.idle)
			r.idle = nil
		}
	}
	r.workers--
}

// running waits up to d for every queued order to be released and reports
// whether releases are still running (and ctx still live): then it is time
// to look for more expired holds.
func (r *releaser) running(d time.Duration) bool {
	r.mu.Lock()
	idle := r.idle
	r.mu.Unlock()
	if idle == nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return false
	case <-r.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
