package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// CreateSale is flashsale.Store.CreateSale: a sale and its nights inserted
// in one transaction. A sale without a creation time is stamped now (and
// sale is updated to match what was stored). An existing ID is
// ErrDuplicate.
func (db Store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	if err := sale.Validate(); err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	if sale.CreatedAt.IsZero() {
		sale.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	}
	rules, err := sqlrows.RulesOf(sale)
	if err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	err = db.inTx(ctx, "create_sale", func(tx Querier) error {
		_, err := tx.Exec(ctx, `INSERT INTO sales (id, title, hotel, room_type, price, original_price,
			currency, starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token, min_tier, created_at_ms,
			min_stays_30d, channels, limit_per_sale, limit_per_user, limit_per_ip, challenge_difficulty, price_tiers, test, time_zone, waiting_room, stay_rules, kind,
			description, paused, revision)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(append([]any{sale.ID, sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
				sale.Currency, sqlrows.MS(sale.StartsAt), sqlrows.MS(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
				sale.PurchaseToken, string(sale.Eligibility.MinTier), sqlrows.MS(sale.CreatedAt)}, rules.Args()...),
				sale.Description, sale.Paused, sale.Revision)...)
		if db.dialect.IsDuplicate(err) {
			return flashsale.ErrDuplicate
		}
		if err != nil {
			return err
		}
		return db.dialect.InsertNights(ctx, tx, sale)
	})
	if err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	return nil
}

// saleColumns joins a sale (s) with its units (n): one row per unit, in
// sqlrows.Sales's column order.
func (d Dialect) saleColumns() string {
	return `s.id, s.title, s.hotel, s.room_type, s.price, s.original_price, s.currency,
	s.starts_at_ms, s.ends_at_ms, s.per_user_limit, s.hold_seconds, s.purchase_token, s.min_tier,
	s.created_at_ms, s.min_stays_30d, s.channels, s.limit_per_sale, s.limit_per_user, s.limit_per_ip,
	s.challenge_difficulty, s.price_tiers, s.test, s.time_zone, s.waiting_room, s.stay_rules, s.kind, s.description, s.paused, s.revision, ` + d.Date("n.date") + `, n.stock,
	n.start_time, n.minutes`
}

// Sale is flashsale.Store.Sale: one sale with its nights, or ErrNotFound.
func (db Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	sale, err := db.dialect.sale(ctx, db.pool, id)
	if err != nil {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, err)
	}
	return sale, nil
}

// Sale reads one sale with its nights through q, or ErrNotFound.
func (d Dialect) sale(ctx context.Context, q Querier, id string) (*flashsale.Sale, error) {
	sales, err := queryRows(ctx, q, sqlrows.Sales, `SELECT `+d.saleColumns()+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.id = ? ORDER BY n.idx`, id)
	if err != nil {
		return nil, err
	}
	if len(sales) == 0 {
		return nil, flashsale.ErrNotFound
	}
	return sales[0], nil
}

// Sales is flashsale.Store.Sales: the sales that end after now, ordered by
// start time (then ID, so the order is stable).
func (db Store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	sales, err := queryRows(ctx, db.pool, sqlrows.Sales, `SELECT `+db.dialect.saleColumns()+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.ends_at_ms > ?
		ORDER BY s.starts_at_ms, s.id, n.idx`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	return sales, nil
}

// Revisions is flashsale.Store.Revisions: the revision of each sale that
// ends after now, by ID.
func (db Store) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	revs, err := queryRows(ctx, db.pool, sqlrows.Revisions, `SELECT id, revision FROM sales WHERE ends_at_ms > ?`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	return revs, nil
}

// NightStocksOf is flashsale.Store.NightStocksOf: the counters of each
// sale of saleIDs that exists, by ID, one query per sqlrows.Batch of them.
func (db Store) NightStocksOf(ctx context.Context, saleIDs []string) (map[string][]flashsale.NightStock, error) {
	out := make(map[string][]flashsale.NightStock, len(saleIDs))
	for ids := range sqlrows.Batches(saleIDs) {
		_, err := queryRows(ctx, db.pool, func(rows sqlrows.Rows) (struct{}, error) {
			return struct{}{}, sqlrows.SalesNightStocks(rows, out)
		}, `SELECT sale_id, `+db.dialect.Date("date")+`, stock, held, sold FROM nights
			WHERE sale_id IN (`+sqlrows.Marks(len(ids))+`) ORDER BY sale_id, idx`, sqlrows.Args(ids)...)
		if err != nil {
			return nil, fmt.Errorf("night stocks of %d sales: %w", len(saleIDs), err)
		}
	}
	return out, nil
}

// NightStocks is flashsale.Store.NightStocks: the counters of each night
// of a sale, in night order, or ErrNotFound for an unknown sale.
func (db Store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	nights, err := db.dialect.nightStocks(ctx, db.pool, saleID, false)
	if err != nil {
		return nil, fmt.Errorf("night stocks: sale=%s: %w", saleID, err)
	}
	return nights, nil
}

// units reads a sale's units as stored (sqlrows.Units) through q.
func (d Dialect) units(ctx context.Context, q Querier, saleID string) ([]flashsale.Night, error) {
	return queryRows(ctx, q, sqlrows.Units, `SELECT `+d.Date("date")+`, stock, start_time, minutes
		FROM nights WHERE sale_id = ? ORDER BY idx`, saleID)
}

// nightStocks reads a sale's nights with their counters through q, in
// night order; with lock, locking them (FOR UPDATE).
func (d Dialect) nightStocks(ctx context.Context, q Querier, saleID string, lock bool) ([]flashsale.NightStock, error) {
	query := `SELECT ` + d.Date("date") + `, stock, held, sold FROM nights WHERE sale_id = ? ORDER BY idx`
	if lock {
		query += ` FOR UPDATE`
	}
	return queryRows(ctx, q, sqlrows.NightStocks, query, saleID)
}

// Snapshot reads a sale, its counters and every one of its orders through
// tx, a read-only REPEATABLE READ transaction, so that the counters and the
// reservations agree with each other. The first read fixes the snapshot;
// the orders go first so that the later reads see the same moment.
func (d Dialect) Snapshot(ctx context.Context, tx Querier, saleID string) (*flashsale.StockSnapshot, error) {
	os, err := queryRows(ctx, tx, sqlrows.Orders, d.selectOrders()+`WHERE o.sale_id = ? ORDER BY o.created_at_ms, o.id`, saleID)
	if err != nil {
		return nil, err
	}
	sale, err := d.sale(ctx, tx, saleID)
	if err != nil {
		return nil, err
	}
	nights, err := d.nightStocks(ctx, tx, saleID, false)
	if err != nil {
		return nil, err
	}
	snap := &flashsale.StockSnapshot{Sale: sale, Nights: nights, Reservations: make([]flashsale.Reservation, len(os))}
	for i, o := range os {
		snap.Reservations[i] = o.Reservation()
	}
	return snap, nil
}
