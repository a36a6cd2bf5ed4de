package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The operator's changes of a sale: UpdateSale and AdjustStock.
//
// Lock order: the sale row first, then its nights. PlaceOrders locks the
// batch's sale rows (SELECT ... FOR UPDATE) before it touches a night, so
// a change that took a night first and then waited for the sale row would
// deadlock with a batch holding the sale and waiting for that night.
// Transition and ExpireHolds lock orders, users and nights but never a
// sale row (they read it without a lock), so a change holding the sale
// while it waits for a night they hold waits for nothing that waits for
// it. Two changes of one sale take turns on the sale row.

// ListSales returns up to q.Limit sales matching q, newest first, with
// their nights: one query, the page of sale IDs chosen in a derived table.
func (s *Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	f := sqlrows.NewFilter(false)
	if err := f.Sales(q); err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	sales, err := querySales(ctx, s.db, `SELECT `+saleColumns+` FROM
		(SELECT id FROM sales `+f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit))+`) AS page
		JOIN sales s ON s.id = page.id JOIN nights n ON n.sale_id = s.id
		ORDER BY s.id DESC, n.idx`, f.Args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", down(err))
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store and sqlrows.UpdateSale. The conditional UPDATE is the
// guard, so of two editors of one revision exactly one wins.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	err := s.inTx(ctx, "update_sale", func(tx *sql.Tx) error {
		return sqlrows.UpdateSale(sqlrows.SaleEdit{
			Update: func() (bool, error) {
				rules := sqlrows.RulesOf(sale)
				return affected(tx.ExecContext(ctx, `UPDATE sales SET title = ?, hotel = ?, room_type = ?, price = ?,
					original_price = ?, currency = ?, starts_at_ms = ?, ends_at_ms = ?, per_user_limit = ?,
					hold_seconds = ?, purchase_token = ?, min_tier = ?, min_stays_30d = ?, channels = ?,
					limit_per_sale = ?, limit_per_user = ?, limit_per_ip = ?, challenge_difficulty = ?, price_tiers = ?, test = ?,
					description = ?, paused = ?, revision = revision + 1
					WHERE id = ? AND revision = ?`,
					append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
						sale.Currency, ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
						sale.PurchaseToken, string(sale.Eligibility.MinTier)}, rules.Args()...),
						sale.Description, sale.Paused, sale.ID, rev)...))
			},
			Exists: func() (bool, error) {
				return exists(ctx, tx, "SELECT COUNT(*) FROM sales WHERE id = ?", sale.ID)
			},
			Nights: func(lock bool) ([]flashsale.NightStock, error) {
				if !lock {
					return queryNightStocks(ctx, tx, sale.ID)
				}
				rows, err := tx.QueryContext(ctx, `SELECT DATE_FORMAT(date, '%Y-%m-%d'), stock, held, sold
					FROM nights WHERE sale_id = ? ORDER BY idx FOR UPDATE`, sale.ID)
				if err != nil {
					return nil, err
				}
				defer rows.Close()
				return sqlrows.NightStocks(rows)
			},
			Rewrite: func() error {
				if _, err := tx.ExecContext(ctx, "DELETE FROM nights WHERE sale_id = ?", sale.ID); err != nil {
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
func logChange(ctx context.Context, tx *sql.Tx, saleID string, c flashsale.SaleChange) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES (?, ?, ?, ?, ?)`, saleID, ms(c.At), c.Kind, c.Revision, c.Detail)
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
	err := s.inTx(ctx, "adjust_stock", func(tx *sql.Tx) (err error) {
		night, err = sqlrows.AdjustStock(sqlrows.StockChange{
			// The sale row first: see the lock order above.
			Bump: func() (rev int64, found bool, err error) {
				if found, err = affected(tx.ExecContext(ctx, "UPDATE sales SET revision = revision + 1 WHERE id = ?",
					saleID)); err != nil || !found {
					return 0, found, err
				}
				return rev, true, tx.QueryRowContext(ctx, "SELECT revision FROM sales WHERE id = ?", saleID).Scan(&rev)
			},
			Adjust: func() (n flashsale.NightStock, changed bool, err error) {
				if changed, err = affected(tx.ExecContext(ctx, `UPDATE nights SET stock = stock + ?
					WHERE sale_id = ? AND date = ? AND stock + ? >= held + sold AND stock + ? <= ?`,
					d.Delta, saleID, d.Date, d.Delta, d.Delta, flashsale.MaxStock)); err != nil || !changed {
					return n, changed, err
				}
				return n, true, tx.QueryRowContext(ctx, `SELECT DATE_FORMAT(date, '%Y-%m-%d'), stock, held, sold
					FROM nights WHERE sale_id = ? AND date = ?`, saleID, d.Date).Scan(&n.Date, &n.Stock, &n.Held, &n.Sold)
			},
			NightExists: func() (bool, error) {
				return exists(ctx, tx, "SELECT COUNT(*) FROM nights WHERE sale_id = ? AND date = ?", saleID, d.Date)
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

// affected reports whether a statement changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// exists runs a COUNT(*) query and reports whether it counted a row.
func exists(ctx context.Context, q querier, query string, args ...any) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, query, args...).Scan(&n)
	return n > 0, err
}

// SaleChanges returns a sale's change log, oldest first, or ErrNotFound
// for an unknown sale.
func (s *Store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at_ms, kind, revision, detail FROM sale_changes
		WHERE sale_id = ? ORDER BY id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, down(err))
	}
	defer rows.Close()
	changes, err := sqlrows.SaleChanges(rows, saleID)
	if err == nil && len(changes) == 0 {
		err = saleExists(ctx, s.db, saleID)
	}
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, down(err))
	}
	return changes, nil
}

// saleExists returns ErrNotFound when there is no such sale.
func saleExists(ctx context.Context, q querier, id string) error {
	found, err := exists(ctx, q, "SELECT COUNT(*) FROM sales WHERE id = ?", id)
	if err == nil && !found {
		err = flashsale.ErrNotFound
	}
	return err
}
