package funnel

import (
	"context"
	"time"
)

// LatePaymentsDefault is how long after a sale's last hold can end a
// payment may still take an expired hold's rooms back (MarkPaid's retake):
// as long as the Redis engine keeps a sale's keys (redis.expireAt).
const LatePaymentsDefault = 24 * time.Hour

// forgetTick is how often the sales over for good are looked for.
const forgetTick = time.Minute

// forgetOver drops from the engine, the catalog and admission every sale
// over for good: ended, its last hold run out (a hold taken at the end
// lasts HoldDuration) and LatePayments passed. Until then a late payment
// can still retake its rooms; after, it is refused as too late
// (ErrHoldExpired: the platform refunds), as after a restart, which loads
// only the current sales. So an instance's memory follows the live sales,
// not every order of history (issue 26); the database keeps them all.
func (s *Service) forgetOver(ctx context.Context) {
	now := s.now()
	for _, sale := range s.sales.all() {
		if now.Before(sale.EndsAt.Add(sale.HoldDuration() + s.latePayments)) {
			continue
		}
		if err := s.engine.Forget(ctx, sale.ID); err != nil {
			s.log.Warn("forget a sale that is over; trying again later", "sale_id", sale.ID, "err", err)
			continue
		}
		s.sales.drop(sale.ID)
		s.admit.forget(sale.ID)
		s.gate.forget(sale.ID)
		s.log.Debug("sale over for good: forgotten by the stock engine", "sale_id", sale.ID)
	}
}

// forgetLoop runs forgetOver every forgetTick until ctx ends.
func (s *Service) forgetLoop(ctx context.Context) {
	every(ctx, forgetTick, nil, s.forgetOver)
}
