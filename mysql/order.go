package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// orderColumns reads an order with its check-in date (the date of its first
// night; empty if the sale is unknown, which only a failed order can name).
const orderColumns = orderFields + `,
	COALESCE(DATE_FORMAT(n.date, '%Y-%m-%d'), '')
	FROM orders o LEFT JOIN nights n ON n.sale_id = o.sale_id AND n.idx = o.first_night `

// orderFields are the columns of an order row itself, in scanOrder's order
// (which then wants the check-in date).
const orderFields = `o.id, o.sale_id, o.user_id, o.idempotency_key, o.status, o.first_night, o.nights,
	o.rooms, o.amount, o.currency, o.hold_expires_at_ms, o.payment_ref, o.created_at_ms, o.updated_at_ms`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanOrder(row scanner) (*flashsale.Order, error) {
	var (
		o                             flashsale.Order
		key                           sql.NullString
		status                        string
		holdExpires, created, updated int64
	)
	if err := row.Scan(&o.ID, &o.SaleID, &o.UserID, &key, &status, &o.FirstNight, &o.Nights,
		&o.Rooms, &o.Amount, &o.Currency, &holdExpires, &o.PaymentRef, &created, &updated, &o.CheckIn); err != nil {
		return nil, err
	}
	o.IdempotencyKey = key.String
	o.Status = flashsale.OrderStatus(status)
	o.HoldExpiresAt, o.CreatedAt, o.UpdatedAt = fromMS(holdExpires), fromMS(created), fromMS(updated)
	return &o, nil
}

func queryOrder(ctx context.Context, q querier, where string, args ...any) (*flashsale.Order, error) {
	o, err := scanOrder(q.QueryRowContext(ctx, `SELECT `+orderColumns+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flashsale.ErrNotFound
	}
	return o, err
}

func queryOrders(ctx context.Context, q querier, where string, args ...any) ([]*flashsale.Order, error) {
	return scanOrders(q.QueryContext(ctx, `SELECT `+orderColumns+where, args...))
}

// scanOrders reads every row of a query that selects what scanOrder reads.
func scanOrders(rows *sql.Rows, err error) ([]*flashsale.Order, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	orders := []*flashsale.Order{}
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// Order returns one order, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	o, err := queryOrder(ctx, s.db, `WHERE o.id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("order: order=%s: %w", id, err)
	}
	return o, nil
}

// OrderByKey returns the order a user placed with an idempotency key, or
// ErrNotFound. The empty key names no order.
func (s *Store) OrderByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Order, error) {
	if key == "" {
		return nil, fmt.Errorf("order by key: sale=%s: %w", saleID, flashsale.ErrNotFound)
	}
	o, err := queryOrder(ctx, s.db, `WHERE o.sale_id = ? AND o.user_id = ? AND o.idempotency_key = ?`, saleID, userID, key)
	if err != nil {
		return nil, fmt.Errorf("order by key: sale=%s: %w", saleID, err)
	}
	return o, nil
}

// saleTerms is what PlaceOrders needs to know about a sale.
type saleTerms struct {
	known    bool
	limit    int
	currency string
}

// PlaceOrders writes a batch of reservations in one transaction. Each
// reservation runs under its own savepoint:
//
//  1. insert the order as held: a duplicate ID is ErrDuplicate (nothing
//     changed); a duplicate idempotency key is ErrKeyConflict, and the order
//     goes in as failed without the key;
//  2. add the rooms to the user's count with a conditional upsert: no row
//     changed means ErrLimitExceeded;
//  3. take the rooms from every night with a conditional update: fewer rows
//     than nights means ErrSoldOut (and an unknown sale has no nights).
//
// A refusal in 2 or 3 rolls back to the savepoint and inserts the order as
// failed, keeping its key so a retry finds it. The happy path costs four
// round trips per reservation (savepoint, insert, upsert, update); with
// multiStatements off they cannot be merged.
//
// A reservation with no rooms or no nights, which the stock engine never
// produces, is ErrInvalid and writes nothing, so one bad message cannot fail
// the batch.
//
// Lock order: the batch first locks every night of its sales, sorted by
// (sale_id, idx), then orders and user_rooms rows as it goes. Transition
// locks one order, then its nights in idx order, then the user's row. So two
// batches on a sale run one after the other instead of deadlocking on the
// nights they share in different orders, and a batch never waits for a night
// while holding a user row that a Transition waits for. What remains (say a
// redelivered order that a Transition holds) is rare, and inTx reruns the
// transaction.
func (s *Store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	results := make([]error, len(rs))
	if len(rs) == 0 {
		return results, nil
	}
	err := s.inTx(ctx, "place_orders", func(tx *sql.Tx) error {
		clear(results)
		terms, err := lockSales(ctx, tx, rs)
		if err != nil {
			return err
		}
		nowMS := time.Now().UnixMilli()
		for i := range rs {
			if results[i], err = placeOrder(ctx, tx, &rs[i], terms[rs[i].SaleID], nowMS); err != nil {
				return fmt.Errorf("order=%s: %w", rs[i].OrderID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	return results, nil
}

// lockSales locks the nights of every sale in the batch, in primary key
// order, and reads each sale's limit and currency. An unknown sale has no
// nights, so its orders fail as sold out.
func lockSales(ctx context.Context, tx *sql.Tx, rs []flashsale.Reservation) (map[string]saleTerms, error) {
	terms := make(map[string]saleTerms, 1)
	var args []any
	for _, r := range rs {
		if _, ok := terms[r.SaleID]; !ok {
			terms[r.SaleID] = saleTerms{}
			args = append(args, r.SaleID)
		}
	}
	in := "(?" + strings.Repeat(", ?", len(args)-1) + ")"
	// A range scan of the primary key locks in (sale_id, idx) order.
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM nights WHERE sale_id IN "+in+" FOR UPDATE", args...).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, per_user_limit, currency FROM sales WHERE id IN "+in, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var t saleTerms
		if err := rows.Scan(&id, &t.limit, &t.currency); err != nil {
			return nil, err
		}
		t.known = true
		terms[id] = t
	}
	return terms, rows.Err()
}

const insertOrder = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
	nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, created_at_ms, updated_at_ms)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?)`

// placeOrder writes one reservation. It returns the reservation's outcome,
// or an error that aborts the batch.
func placeOrder(ctx context.Context, tx *sql.Tx, r *flashsale.Reservation, t saleTerms, nowMS int64) (outcome, err error) {
	if r.Rooms < 1 || r.Nights < 1 || r.FirstNight < 0 {
		// The stock engine never produces one; refusing it here keeps one bad
		// message from failing the whole batch.
		return flashsale.ErrInvalid, nil
	}
	insert := func(status flashsale.OrderStatus, key string) error {
		_, err := tx.ExecContext(ctx, insertOrder, r.OrderID, r.SaleID, r.UserID, nullKey(key), string(status),
			r.FirstNight, r.Nights, r.Rooms, r.Amount, t.currency, ms(r.HoldExpiresAt), nowMS, nowMS)
		return err
	}
	fail := func(reason error) (error, error) {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT reservation"); err != nil {
			return nil, err
		}
		if err := insert(flashsale.OrderFailed, r.IdempotencyKey); err != nil {
			return nil, err
		}
		return reason, nil
	}

	if _, err := tx.ExecContext(ctx, "SAVEPOINT reservation"); err != nil {
		return nil, err
	}
	err = insert(flashsale.OrderHeld, r.IdempotencyKey)
	if isDuplicate(err) {
		// Which unique key? The failed statement changed nothing, so look.
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM orders WHERE id = ?)", r.OrderID).Scan(&exists); err != nil {
			return nil, err
		}
		if exists {
			return flashsale.ErrDuplicate, nil
		}
		if err := insert(flashsale.OrderFailed, ""); err != nil {
			return nil, err
		}
		return flashsale.ErrKeyConflict, nil
	}
	if err != nil {
		return nil, err
	}

	if !t.known {
		return fail(flashsale.ErrSoldOut)
	}
	if r.Rooms > t.limit {
		return fail(flashsale.ErrLimitExceeded)
	}
	// Rows affected: 1 inserted, 2 updated, 0 when the IF kept the old value
	// (clientFoundRows is off, so an unchanged row counts 0).
	res, err := tx.ExecContext(ctx, `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE rooms = IF(rooms + VALUES(rooms) <= ?, rooms + VALUES(rooms), rooms)`,
		r.SaleID, r.UserID, r.Rooms, t.limit)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n == 0 {
		return fail(flashsale.ErrLimitExceeded)
	}

	res, err = tx.ExecContext(ctx, `UPDATE nights SET held = held + ?
		WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`,
		r.Rooms, r.SaleID, r.FirstNight, r.FirstNight+r.Nights, r.Rooms)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != int64(r.Nights) {
		return fail(flashsale.ErrSoldOut)
	}

	return nil, nil
}

// Transition moves an order from one status to another if it is still in
// from, adjusting the night and user counters in the same transaction. The
// status change is itself the guard (UPDATE ... WHERE status = from), so of
// many racing callers exactly one proceeds.
func (s *Store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	if !validTransition(from, to) {
		return nil, fmt.Errorf("transition: order=%s %s->%s: %w", id, from, to, flashsale.ErrInvalid)
	}
	var order *flashsale.Order
	err := s.inTx(ctx, "transition", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE orders SET status = ?, updated_at_ms = ?,
			payment_ref = IF(? = 'paid', ?, payment_ref) WHERE id = ? AND status = ?`,
			string(to), now.UnixMilli(), string(to), paymentRef, id, string(from))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var status string
			err := tx.QueryRowContext(ctx, "SELECT status FROM orders WHERE id = ?", id).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return flashsale.ErrNotFound
			}
			if err != nil {
				return err
			}
			return flashsale.ErrStale
		}
		if order, err = queryOrder(ctx, tx, `WHERE o.id = ?`, id); err != nil {
			return err
		}
		return moveCounters(ctx, tx, order, from, to)
	})
	if err != nil {
		return nil, fmt.Errorf("transition: order=%s %s->%s: %w", id, from, to, err)
	}
	return order, nil
}

// validTransition lists the pairs Transition accepts.
func validTransition(from, to flashsale.OrderStatus) bool {
	switch from {
	case flashsale.OrderHeld:
		return to == flashsale.OrderPaid || to == flashsale.OrderExpired || to == flashsale.OrderCancelled
	case flashsale.OrderExpired, flashsale.OrderCancelled:
		return to == flashsale.OrderPaid
	}
	return false
}

// moveCounters applies a transition to the night and user counters.
func moveCounters(ctx context.Context, tx *sql.Tx, o *flashsale.Order, from, to flashsale.OrderStatus) error {
	end := o.FirstNight + o.Nights
	switch {
	case from == flashsale.OrderHeld && to == flashsale.OrderPaid:
		return expectRows(tx.ExecContext(ctx, `UPDATE nights SET held = held - ?, sold = sold + ?
			WHERE sale_id = ? AND idx >= ? AND idx < ? AND held >= ?`,
			o.Rooms, o.Rooms, o.SaleID, o.FirstNight, end, o.Rooms))(o.Nights, errCounters)

	case from == flashsale.OrderHeld:
		if err := expectRows(tx.ExecContext(ctx, `UPDATE nights SET held = held - ?
			WHERE sale_id = ? AND idx >= ? AND idx < ? AND held >= ?`,
			o.Rooms, o.SaleID, o.FirstNight, end, o.Rooms))(o.Nights, errCounters); err != nil {
			return err
		}
		return expectRows(tx.ExecContext(ctx, `UPDATE user_rooms SET rooms = rooms - ?
			WHERE sale_id = ? AND user_id = ? AND rooms >= ?`,
			o.Rooms, o.SaleID, o.UserID, o.Rooms))(1, errCounters)

	default: // expired or cancelled -> paid: take the units again, both guarded.
		if err := expectRows(tx.ExecContext(ctx, `UPDATE nights SET sold = sold + ?
			WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`,
			o.Rooms, o.SaleID, o.FirstNight, end, o.Rooms))(o.Nights, flashsale.ErrSoldOut); err != nil {
			return err
		}
		var limit int
		if err := tx.QueryRowContext(ctx, "SELECT per_user_limit FROM sales WHERE id = ?", o.SaleID).Scan(&limit); err != nil {
			return err
		}
		if o.Rooms > limit {
			return flashsale.ErrLimitExceeded
		}
		return expectRows(tx.ExecContext(ctx, `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE rooms = IF(rooms + VALUES(rooms) <= ?, rooms + VALUES(rooms), rooms)`,
			o.SaleID, o.UserID, o.Rooms, limit))(-1, flashsale.ErrLimitExceeded)
	}
}

// errCounters means the counters disagree with an order: a bug, never a
// customer-facing outcome.
var errCounters = errors.New("night or user counters do not match the order")

// expectRows checks a statement's rows affected: exactly want, or any
// non-zero count when want is -1. Otherwise it returns refusal, which rolls
// the transaction back.
func expectRows(res sql.Result, err error) func(want int, refusal error) error {
	return func(want int, refusal error) error {
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if (want == -1 && n == 0) || (want >= 0 && n != int64(want)) {
			return refusal
		}
		return nil
	}
}
