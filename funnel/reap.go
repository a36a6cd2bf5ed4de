package funnel

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// ReapWorkersDefault is how many expired holds one instance releases at
// once. A flash sale's holds expire together (the opening second sells the
// stock, so they all end within the same second), and each release is a
// database transaction of a few milliseconds: one at a time, a few hundred
// holds take longer than the second I5 allows.
const ReapWorkersDefault = 8

// reapLoop releases expired holds. It polls the database, the truth for
// holds, so it needs no timers to rebuild after a restart and any number of
// instances can run it: the conditional held -> expired transition lets
// exactly one of them release each hold.
func (s *Service) reapLoop() {
	defer s.done.Done()
	t := time.NewTicker(s.reapInt)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Reap(context.Background())
		}
	}
}

// Reap releases every hold expired by now and returns how many it released.
// Each batch is released by ReapWorkersDefault goroutines in a random order:
// every instance reads the same oldest-first list, and walking it in the
// same order would make them queue on the same rows' locks instead of
// sharing the work.
func (s *Service) Reap(ctx context.Context) int {
	var released atomic.Int64
	for {
		orders, err := s.store.ExpiredHolds(ctx, s.now(), ReapBatchDefault)
		if err != nil {
			s.log.Error("find expired holds", "err", err)
			return int(released.Load())
		}
		rand.Shuffle(len(orders), func(i, j int) { orders[i], orders[j] = orders[j], orders[i] })
		var (
			next, progress atomic.Int64
			wg             sync.WaitGroup
		)
		for range min(ReapWorkersDefault, len(orders)) {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(orders) {
						return
					}
					o := orders[i]
					// The transition's own time stamps the row, so updated_at
					// says when the hold was really released.
					exp, err := s.store.Transition(ctx, o.ID, flashsale.OrderHeld, flashsale.OrderExpired, "", s.now())
					if errors.Is(err, flashsale.ErrStale) {
						progress.Add(1) // paid, cancelled or reaped elsewhere
						continue
					}
					if err != nil {
						s.log.Error("expire hold", "sale_id", o.SaleID, "order_id", o.ID, "err", err)
						continue
					}
					s.release(ctx, exp)
					released.Add(1)
					progress.Add(1)
				}
			})
		}
		wg.Wait()
		if len(orders) < ReapBatchDefault || progress.Load() == 0 {
			return int(released.Load())
		}
	}
}
