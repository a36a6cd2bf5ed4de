package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The frames of the writes whose statements differ between the servers
// (PlaceOrders, Transition, FailOrder, ExpireHolds), generic in the store's
// own transaction type T: each runs the transaction of the store's Driver,
// rerun from the start should the database abort it as a deadlock victim,
// the reads and checks both servers make alike and the outbox write that
// ends it, and hands the store's own statements the native T.

// ErrCounters means the night or user counters disagree with an order: a
// bug, never a customer-facing outcome. A statement whose rows affected
// are not what the orders it changes imply returns it, which rolls the
// transaction back.
var ErrCounters = errors.New("night or user counters do not match the order")

// SaleTerms is what PlaceOrders needs to know about each sale of its
// batch, read with the sale's row; the zero value is a sale that does not
// exist.
type SaleTerms struct {
	Known    bool
	Limit    int // per_user_limit
	Currency string
}

// Refuse returns why PlaceOrders refuses r before anything is written, or
// nil: ErrInvalid for a stay the stock engine would never produce (no
// rooms, no nights, a negative first night) and ErrNotFound for a sale
// that does not exist (not Known in terms). Refusing them first keeps one
// bad message from failing the batch, and writing nothing (no row, no key
// bound, the ID stays free) gives a redelivery the same answer.
func Refuse(r *flashsale.Reservation, terms map[string]SaleTerms) error {
	switch {
	case r.Rooms < 1 || r.Nights < 1 || r.FirstNight < 0:
		return flashsale.ErrInvalid
	case !terms[r.SaleID].Known:
		return flashsale.ErrNotFound
	}
	return nil
}

// PlaceOrders is the frame of both servers' Store.PlaceOrders: one result
// per reservation, the whole batch in one transaction of d's that is rerun
// from the start, results cleared, should it be a deadlock victim. place
// (the store's statements, on its own transaction) fills results and
// returns the batch's notices, which go to the outbox last.
func PlaceOrders[T any](ctx context.Context, d Driver[T], rs []flashsale.Reservation,
	place func(ctx context.Context, tx T, results []error) ([]flashsale.Notice, error)) ([]error, error) {
	results := make([]error, len(rs))
	if len(rs) == 0 {
		return results, nil
	}
	err := d.InTx(ctx, "place_orders", func(tx T) error {
		clear(results)
		ns, err := place(ctx, tx, results)
		if err != nil {
			return err
		}
		return d.Notices(ctx, tx, ns)
	})
	if err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	return results, nil
}

// Transition is the frame of both servers' Store.Transition: the order
// moves from one status to another if it is still in from, with move (the
// store's statements, on its own transaction) adjusting the night and user
// counters in the same transaction, and its notices written last. The
// status change is itself the guard (UPDATE ... WHERE status = from), so
// of many racing callers exactly one proceeds; the others find the order
// gone (ErrNotFound) or moved on (ErrStale). move returns the sale's nights
// as it locked them when it takes rooms again (see sqlrows.TransitionNotices).
func Transition[T any](ctx context.Context, d Driver[T], id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time,
	move func(ctx context.Context, tx T, o *flashsale.Order, from, to flashsale.OrderStatus) (*sqlrows.Stock, error)) (*flashsale.Order, error) {
	if !from.CanBecome(to) {
		return nil, fmt.Errorf("transition: order=%s %s->%s: %w", id, from, to, flashsale.ErrInvalid)
	}
	set, args := `status = ?, updated_at_ms = ?`, []any{string(to), now.UnixMilli()}
	if to == flashsale.OrderPaid {
		set, args = set+`, payment_ref = ?`, append(args, paymentRef)
	}
	args = append(args, id, string(from))
	var order *flashsale.Order
	err := d.InTx(ctx, "transition", func(tx T) error {
		q := d.Querier(tx)
		n, err := q.Exec(ctx, `UPDATE orders SET `+set+` WHERE id = ? AND status = ?`, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			found, err := exists(ctx, q, "SELECT EXISTS(SELECT 1 FROM orders WHERE id = ?)", id)
			switch {
			case err != nil:
				return err
			case !found:
				return flashsale.ErrNotFound
			}
			return flashsale.ErrStale
		}
		if order, err = d.Dialect.order(ctx, q, `WHERE o.id = ?`, id); err != nil {
			return err
		}
		stock, err := move(ctx, tx, order, from, to)
		if err != nil {
			return err
		}
		return d.Notices(ctx, tx, sqlrows.TransitionNotices(order, from, stock, now.UnixMilli()))
	})
	if err != nil {
		return nil, fmt.Errorf("transition: order=%s %s->%s: %w", id, from, to, err)
	}
	return order, nil
}

// FailOrder is the frame of both servers' Store.FailOrder: a reservation
// the order path gave up on recorded as a failed order with reason (cut
// to sqlrows.MaxFailureReason), taking no stock, and its notice, read back
// as committed, in one transaction of d's. insert (the store's INSERT, on
// its own transaction) writes r as failed with the given key, reason and
// time and reports what happened; sqlrows.FailOrder holds the steps.
func FailOrder[T any](ctx context.Context, d Driver[T], r flashsale.Reservation, reason string,
	insert func(ctx context.Context, tx T, r *flashsale.Reservation, key, reason string, atMS int64) (sqlrows.Inserted, error)) error {
	reason = sqlrows.FailureReason(reason)
	err := d.InTx(ctx, "fail_order", func(tx T) error {
		at := time.Now().UnixMilli()
		err := sqlrows.FailOrder(&r, func(key string) (sqlrows.Inserted, error) {
			return insert(ctx, tx, &r, key, reason, at)
		})
		if err != nil {
			return err
		}
		o, err := d.Dialect.order(ctx, d.Querier(tx), `WHERE o.id = ?`, r.OrderID)
		if err != nil {
			return err
		}
		return d.Notices(ctx, tx, []flashsale.Notice{flashsale.OrderNotice(o, sqlrows.FromMS(at))})
	})
	if err != nil {
		return fmt.Errorf("fail order: order=%s: %w", r.OrderID, err)
	}
	return nil
}

// ExpireHolds is the frame of both servers' Store.ExpireHolds, generic in
// the store's own transaction type T: the reaper asks every 100 ms and
// almost always nothing is due, so one indexed read answers that instead of
// a locking transaction (three round trips on every instance, all sale
// long); otherwise, in one transaction of d's that is rerun should it be a
// deadlock victim, it locks up to limit due holds, oldest first, skipping
// the ones another transaction holds (a Transition paying or cancelling
// one, another instance's reaper), hands them to expire (the store's
// statements: mark them expired, give their rooms back, fill in their
// check-in dates and slots) and writes their notices last. It returns
// them as expired.
func ExpireHolds[T any](ctx context.Context, d Driver[T], now time.Time, limit int,
	expire func(ctx context.Context, tx T, orders []*flashsale.Order, nowMS int64) error) ([]*flashsale.Order, error) {
	if limit <= 0 {
		return []*flashsale.Order{}, nil
	}
	nowMS := now.UnixMilli()
	var due bool
	if err := d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders
		WHERE status = 'held' AND hold_expires_at_ms <= ?)`, nowMS).Scan(&due); err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	if !due {
		return []*flashsale.Order{}, nil
	}
	var orders []*flashsale.Order
	err := d.InTx(ctx, "expire_holds", func(tx T) (err error) {
		// No join: FOR UPDATE would lock (and SKIP LOCKED skip) the nights
		// too, and on PostgreSQL it would walk each hammered night row's
		// chain of dead versions once per order; expire reads each date
		// and start time once. The (status, hold_expires_at_ms) index
		// yields the rows in this order without a sort.
		orders, err = queryRows(ctx, d.Querier(tx), sqlrows.Orders, `SELECT `+orderFields+`, '', '' FROM orders o
			WHERE o.status = 'held' AND o.hold_expires_at_ms <= ?
			ORDER BY o.hold_expires_at_ms, o.id LIMIT ? FOR UPDATE SKIP LOCKED`, nowMS, limit)
		if err != nil || len(orders) == 0 {
			return err
		}
		if err := expire(ctx, tx, orders, nowMS); err != nil {
			return err
		}
		for _, o := range orders {
			o.Status, o.UpdatedAt = flashsale.OrderExpired, sqlrows.FromMS(nowMS)
		}
		return d.Notices(ctx, tx, sqlrows.ExpireNotices(orders, nowMS))
	})
	if err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	return orders, nil
}
