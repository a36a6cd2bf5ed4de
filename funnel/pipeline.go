package funnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
)

// ConfirmingWriter writes through w and marks each reservation confirmed in
// the outbox once w accepted it.
type ConfirmingWriter struct {
	W      flashsale.OrderWriter
	Outbox flashsale.Outbox
	Logger *slog.Logger
}

// Write implements flashsale.OrderWriter.
func (c *ConfirmingWriter) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	status, err := c.W.Write(ctx, r)
	if err == nil {
		if cerr := c.Outbox.Confirm(ctx, r.SaleID, r.OrderID); cerr != nil {
			// Harmless: the relay republishes it and the consumer sees a duplicate.
			c.Logger.Warn("confirm outbox", "sale_id", r.SaleID, "order_id", r.OrderID, "err", cerr)
		}
	}
	return status, err
}

// Relay republishes reservations the engine recorded but the order path
// never confirmed. Publishing twice is harmless: the order id is the
// database's primary key.
type Relay struct {
	Outbox flashsale.Outbox
	W      flashsale.OrderWriter
	// Age is how old an unconfirmed reservation must be before it is
	// republished: longer than a normal publish takes (default 2 s).
	Age      time.Duration
	Interval time.Duration // default 1 s
	Logger   *slog.Logger
	Now      func() time.Time
}

// Run republishes until ctx ends.
func (r *Relay) Run(ctx context.Context) {
	age, period := r.Age, r.Interval
	if age == 0 {
		age = 2 * time.Second
	}
	if period == 0 {
		period = time.Second
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	every(ctx, period, nil, func(ctx context.Context) {
		rs, err := r.Outbox.Unconfirmed(ctx, now().Add(-age), 512)
		if err != nil {
			r.Logger.Error("relay: list unconfirmed", "err", err)
			return
		}
		for i := range rs {
			res := &rs[i]
			if _, err := r.W.Write(ctx, res); err != nil {
				r.Logger.Error("relay: republish", "sale_id", res.SaleID, "order_id", res.OrderID, "err", err)
				continue
			}
			if err := r.Outbox.Confirm(ctx, res.SaleID, res.OrderID); err != nil {
				r.Logger.Warn("relay: confirm", "order_id", res.OrderID, "err", err)
			}
			// A warning: each is an order whose first publish's outcome
			// was lost, which an operator wants to see beside the fault.
			r.Logger.Warn("relay: republished", "sale_id", res.SaleID, "order_id", res.OrderID)
		}
	})
}

// ReleasingStore wraps the store a queue consumer writes through: when the
// database refuses an order (it is recorded as failed), the units the
// engine took for it go back. Release is idempotent, so a redelivered
// failed order releases nothing twice.
type ReleasingStore struct {
	Store  flashsale.Store
	Engine flashsale.StockEngine
	Logger *slog.Logger
}

// PlaceOrders implements the consumer's handler.
func (s *ReleasingStore) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	results, err := s.Store.PlaceOrders(ctx, rs)
	if err != nil {
		return nil, err
	}
	for i, res := range results {
		failed := errors.Is(res, flashsale.ErrSoldOut) || errors.Is(res, flashsale.ErrLimitExceeded) || errors.Is(res, flashsale.ErrKeyConflict)
		if errors.Is(res, flashsale.ErrDuplicate) {
			// Written before, perhaps by a consumer that died before releasing.
			o, oerr := s.Store.Order(ctx, rs[i].OrderID)
			failed = oerr == nil && o.Status == flashsale.OrderFailed
		}
		if failed {
			if err := s.Engine.Release(ctx, rs[i].SaleID, rs[i].OrderID); err != nil {
				// The engine undersells this order's rooms until the audit
				// returns them; it never oversells.
				s.Logger.Error("release refused order", "sale_id", rs[i].SaleID, "order_id", rs[i].OrderID, "err", err)
				continue
			}
			s.Logger.Warn("order refused, units released", "sale_id", rs[i].SaleID, "order_id", rs[i].OrderID, "reason", res)
		}
	}
	return results, nil
}

// Ping implements the consumer's handler.
func (s *ReleasingStore) Ping(ctx context.Context) error { return s.Store.Ping(ctx) }

// Dead gives up on an order the queue could not place: it records the
// order as failed with the reason, so its owner reads a final status
// instead of a 404, then returns its units. An error (the database or the
// engine did not answer) keeps the message queued until both are done;
// both steps are idempotent.
func (s *ReleasingStore) Dead(ctx context.Context, r flashsale.Reservation, reason error) error {
	err := s.Store.FailOrder(ctx, r, reason.Error())
	switch {
	case errors.Is(err, flashsale.ErrDuplicate):
		o, oerr := s.Store.Order(ctx, r.OrderID)
		if oerr != nil {
			return fmt.Errorf("dead order=%s: %w", r.OrderID, oerr)
		}
		if o.Status != flashsale.OrderFailed {
			return nil // it was placed after all: its units stay taken
		}
	case errors.Is(err, flashsale.ErrNotFound):
		// No such sale in the database: no row can be written, and the
		// engine has nothing to return if it never knew the sale either.
	case err != nil:
		return fmt.Errorf("dead order=%s: record failed: %w", r.OrderID, err)
	}
	if err := s.Engine.Release(ctx, r.SaleID, r.OrderID); err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
		return fmt.Errorf("dead order=%s: release: %w", r.OrderID, err)
	}
	s.Logger.Warn("order given up, recorded as failed and units released", "sale_id", r.SaleID, "order_id", r.OrderID, "reason", reason)
	return nil
}
