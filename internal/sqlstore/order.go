package sqlstore

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// orderFields are the columns of an order row itself, in sqlrows.Order's
// order (which then wants the check-in date).
const orderFields = `o.id, o.sale_id, o.user_id, o.idempotency_key, o.status, o.first_night, o.nights,
	o.rooms, o.amount, o.currency, o.hold_expires_at_ms, o.payment_ref, o.failure_reason, o.created_at_ms,
	o.updated_at_ms`

// selectOrders reads orders (o) with their check-in date, the date of
// their first night, and its start time (a slot's): empty if that night does not exist, which only a
// failed order can name (a stay starting past the sale's last night;
// PlaceOrders writes no order for an unknown sale). A WHERE clause
// follows.
func (d Dialect) selectOrders() string {
	return `SELECT ` + orderFields + `,
	COALESCE(` + d.Date("n.date") + `, ''), COALESCE(n.start_time, '')
	FROM orders o LEFT JOIN nights n ON n.sale_id = o.sale_id AND n.idx = o.first_night `
}

// order reads the one order where selects through q, or ErrNotFound.
func (d Dialect) order(ctx context.Context, q Querier, where string, args ...any) (*flashsale.Order, error) {
	o, found, err := noRow(sqlrows.Order(q.QueryRow(ctx, d.selectOrders()+where, args...)))
	if err == nil && !found {
		err = flashsale.ErrNotFound
	}
	return o, err
}

// Order is flashsale.Store.Order: one order, or ErrNotFound.
func (db Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	o, err := db.dialect.order(ctx, db.pool, `WHERE o.id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("order: order=%s: %w", id, err)
	}
	return o, nil
}

// OrderByKey is flashsale.Store.OrderByKey: the order a user placed with
// an idempotency key, or ErrNotFound. The empty key names no order.
func (db Store) OrderByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Order, error) {
	if key == "" {
		return nil, fmt.Errorf("order by key: sale=%s: %w", saleID, flashsale.ErrNotFound)
	}
	o, err := db.dialect.order(ctx, db.pool, `WHERE o.sale_id = ? AND o.user_id = ? AND o.idempotency_key = ?`, saleID, userID, key)
	if err != nil {
		return nil, fmt.Errorf("order by key: sale=%s: %w", saleID, err)
	}
	return o, nil
}

// SaleOrders is flashsale.Store.SaleOrders: up to q.Limit of a sale's
// orders, newest first, or ErrNotFound for an unknown sale. An index on
// (sale_id, id) walks them in id order (MySQL's orders_sale, whose InnoDB
// secondary key ends in the primary key, PostgreSQL's orders_sale_id).
func (db Store) SaleOrders(ctx context.Context, saleID string, q flashsale.OrderQuery) ([]*flashsale.Order, error) {
	f := sqlrows.NewFilter(false)
	if err := f.Orders(saleID, q); err != nil {
		return nil, fmt.Errorf("sale orders: sale=%s: %w", saleID, err)
	}
	orders, err := queryRows(ctx, db.pool, sqlrows.Orders, db.dialect.selectOrders()+f.Where()+` ORDER BY o.id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...)
	if err == nil && len(orders) == 0 {
		err = SaleExists(ctx, db.pool, saleID)
	}
	if err != nil {
		return nil, fmt.Errorf("sale orders: sale=%s: %w", saleID, err)
	}
	return orders, nil
}
