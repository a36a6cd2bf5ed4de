package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// ExpireHolds is the frame of both servers' Store.ExpireHolds, generic in
// the store's own transaction type T: the reaper asks every 100 ms and
// almost always nothing is due, so one indexed read answers that instead of
// a locking transaction (three round trips on every instance, all sale
// long); otherwise expire (the store's statements, with their notices) runs
// in inTx, which reruns a deadlock victim.
func ExpireHolds[T any](ctx context.Context, db Store, inTx func(ctx context.Context, op string, fn func(tx T) error) error,
	now time.Time, limit int, expire func(ctx context.Context, tx T) ([]*flashsale.Order, error)) ([]*flashsale.Order, error) {
	if limit <= 0 {
		return []*flashsale.Order{}, nil
	}
	var due bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders
		WHERE status = 'held' AND hold_expires_at_ms <= ?)`, now.UnixMilli()).Scan(&due); err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	if !due {
		return []*flashsale.Order{}, nil
	}
	var orders []*flashsale.Order
	err := inTx(ctx, "expire_holds", func(tx T) (err error) {
		orders, err = expire(ctx, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	return orders, nil
}
