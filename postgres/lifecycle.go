package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The operator's changes of a sale: UpdateSale and AdjustStock.
//
// Lock order: the sale row first, then its nights. PlaceOrders locks every
// night of its sales, and Transition and ExpireHolds lock orders, nights
// and users; none of them locks a sale row (they read it without a lock),
// so a change holding the sale while it waits for a night waits for
// nothing that waits for it, and two changes of one sale take turns on the
// sale row before either touches a night. It is the MySQL store's order,
// which there is required: its PlaceOrders locks sale rows before nights.

// ListSales returns up to q.Limit sales matching q, newest first, with
// their nights: one query, the page of sale IDs chosen in a subquery.
func (s *Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	f := sqlrows.NewFilter(true)
	if err := f.Sales(q); err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	sales, err := querySales(ctx, s.pool, `SELECT `+saleColumns+` FROM
		(SELECT id FROM sales `+f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit))+`) AS page
		JOIN sales s ON s.id = page.id JOIN nights n ON n.sale_id = s.id
		ORDER BY s.id DESC, n.idx`, f.Args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store and sqlrows.UpdateSale. The conditional UPDATE is the
// guard, so of two editors of one revision exactly one wins.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	err := s.inTx(ctx, "update_sale", func(tx pgx.Tx) error {
		return sqlrows.UpdateSale(sqlrows.SaleEdit{
			Update: func() (bool, error) {
				rules := sqlrows.RulesOf(sale)
				tag, err := tx.Exec(ctx, `UPDATE sales SET title = $1, hotel = $2, room_type = $3, price = $4,
					original_price = $5, currency = $6, starts_at_ms = $7, ends_at_ms = $8, per_user_limit = $9,
					hold_seconds = $10, purchase_token = $11, min_tier = $12, min_stays_30d = $13, channels = $14,
					limit_per_sale = $15, limit_per_user = $16, limit_per_ip = $17, challenge_difficulty = $18,
					price_tiers = $19, test = $20, description = $21, paused = $22, revision = revision + 1
					WHERE id = $23 AND revision = $24`,
					append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
						sale.Currency, ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
						sale.PurchaseToken, string(sale.Eligibility.MinTier)}, rules.Args()...),
						sale.Description, sale.Paused, sale.ID, rev)...)
				return tag.RowsAffected() > 0, err
			},
			Exists: func() (bool, error) {
				return exists(ctx, tx, "SELECT EXISTS(SELECT 1 FROM sales WHERE id = $1)", sale.ID)
			},
			Nights: func(lock bool) ([]flashsale.NightStock, error) {
				if !lock {
					return queryNightStocks(ctx, tx, sale.ID)
				}
				rows, err := tx.Query(ctx, `SELECT to_char(date, 'YYYY-MM-DD'), stock, held, sold
					FROM nights WHERE sale_id = $1 ORDER BY idx FOR UPDATE`, sale.ID)
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				return sqlrows.NightStocks(rows)
			},
			Rewrite: func() error {
				if _, err := tx.Exec(ctx, "DELETE FROM nights WHERE sale_id = $1", sale.ID); err != nil {
					return err
				}
				return insertNights(ctx, tx, sale)
			},
			Log: func(c flashsale.SaleChange) error { return logChange(ctx, tx, sale.ID, c) },
		}, sale.Nights, rev, c)
	})
	if err != nil {
		return fmt.Errorf("update sale: sale=%s: %w", sale.ID, err)
	}
	sale.Revision = rev + 1
	return nil
}

// logChange appends c to the sale's change log.
func logChange(ctx context.Context, tx pgx.Tx, saleID string, c flashsale.SaleChange) error {
	_, err := tx.Exec(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES ($1, $2, $3, $4, $5)`, saleID, ms(c.At), c.Kind, c.Revision, c.Detail)
	return err
}

// AdjustStock adds d.Delta rooms to one night; see flashsale.Store and
// sqlrows.AdjustStock. The conditional UPDATE of the night is the guard:
// the stock stays within [held + sold, MaxStock] whatever runs beside it.
func (s *Store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s: %w", saleID, err)
	}
	var night *flashsale.NightStock
	err := s.inTx(ctx, "adjust_stock", func(tx pgx.Tx) (err error) {
		night, err = sqlrows.AdjustStock(sqlrows.StockChange{
			// The sale row first: see the lock order above.
			Bump: func() (rev int64, found bool, err error) {
				err = tx.QueryRow(ctx, "UPDATE sales SET revision = revision + 1 WHERE id = $1 RETURNING revision",
					saleID).Scan(&rev)
				return noRow(rev, err)
			},
			Adjust: func() (n flashsale.NightStock, changed bool, err error) {
				err = tx.QueryRow(ctx, `UPDATE nights SET stock = stock + $1
					WHERE sale_id = $2 AND date = $3::date AND stock + $1 >= held + sold AND stock + $1 <= $4
					RETURNING to_char(date, 'YYYY-MM-DD'), stock, held, sold`,
					d.Delta, saleID, d.Date, flashsale.MaxStock).Scan(&n.Date, &n.Stock, &n.Held, &n.Sold)
				return noRow(n, err)
			},
			NightExists: func() (bool, error) {
				return exists(ctx, tx, "SELECT EXISTS(SELECT 1 FROM nights WHERE sale_id = $1 AND date = $2::date)",
					saleID, d.Date)
			},
			Log: func(c flashsale.SaleChange) error { return logChange(ctx, tx, saleID, c) },
		}, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s night=%s: %w", saleID, d.Date, err)
	}
	return night, nil
}

// noRow turns a RETURNING statement's pgx.ErrNoRows into found = false.
func noRow[T any](v T, err error) (T, bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// exists runs a SELECT EXISTS query.
func exists(ctx context.Context, q querier, query string, args ...any) (bool, error) {
	var found bool
	err := q.QueryRow(ctx, query, args...).Scan(&found)
	return found, err
}

// SaleChanges returns a sale's change log, oldest first, or ErrNotFound
// for an unknown sale.
func (s *Store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT at_ms, kind, revision, detail FROM sale_changes
		WHERE sale_id = $1 ORDER BY id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, err)
	}
	defer rows.Close()
	changes, err := sqlrows.SaleChanges(rows, saleID)
	if err == nil && len(changes) == 0 {
		err = saleExists(ctx, s.pool, saleID)
	}
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, err)
	}
	return changes, nil
}

// saleExists returns ErrNotFound when there is no such sale.
func saleExists(ctx context.Context, q querier, id string) error {
	found, err := exists(ctx, q, "SELECT EXISTS(SELECT 1 FROM sales WHERE id = $1)", id)
	if err == nil && !found {
		err = flashsale.ErrNotFound
	}
	return err
}
