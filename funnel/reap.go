package funnel

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale"
)

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
func (s *Service) Reap(ctx context.Context) int {
	released := 0
	for {
		now := s.now()
		orders, err := s.store.ExpiredHolds(ctx, now, ReapBatchDefault)
		if err != nil {
			s.log.Error("find expired holds", "err", err)
			return released
		}
		progress := false
		for _, o := range orders {
			exp, err := s.store.Transition(ctx, o.ID, flashsale.OrderHeld, flashsale.OrderExpired, "", now)
			if errors.Is(err, flashsale.ErrStale) {
				progress = true // paid, cancelled or reaped elsewhere
				continue
			}
			if err != nil {
				s.log.Error("expire hold", "sale_id", o.SaleID, "order_id", o.ID, "err", err)
				continue
			}
			s.release(ctx, exp)
			released++
			progress = true
		}
		if len(orders) < ReapBatchDefault || !progress {
			return released
		}
	}
}
