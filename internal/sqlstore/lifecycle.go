package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The operator's changes of a sale: UpdateSale and AdjustStock.
//
// Lock order: the sale row first, then its nights. MySQL's PlaceOrders
// locks the batch's sale rows (SELECT ... FOR UPDATE) before it touches a
// night, so a change that took a night first and then waited for the sale
// row would deadlock with a batch holding the sale and waiting for that
// night. Transition and ExpireHolds lock orders, users and nights but
// never a sale row (they read it without a lock), so a change holding the
// sale while it waits for a night they hold waits for nothing that waits
// for it. Two changes of one sale take turns on the sale row.

// ListSales is flashsale.Store.ListSales: up to q.Limit sales matching q,
// newest first, with their nights, in one query, the page of sale IDs
// chosen in a derived table.
func (db Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	f := sqlrows.NewFilter(false)
	if err := f.Sales(q); err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	sales, err := queryRows(ctx, db.pool, sqlrows.Sales, `SELECT `+db.dialect.saleColumns()+` FROM
		(SELECT id FROM sales `+f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit))+`) AS page
		JOIN sales s ON s.id = page.id JOIN nights n ON n.sale_id = s.id
		ORDER BY s.id DESC, n.idx`, f.Args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	return sales, nil
}

// UpdateSale is flashsale.Store.UpdateSale: the sale's fields replaced if
// its revision is still rev; see sqlrows.UpdateSale. The conditional
// UPDATE is the guard, so of two editors of one revision exactly one wins.
func (db Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	rules, err := sqlrows.RulesOf(sale)
	if err != nil {
		return fmt.Errorf("update sale: sale=%s: %w", sale.ID, err)
	}
	err = db.inTx(ctx, "update_sale", func(tx Querier) error {
		return sqlrows.UpdateSale(sqlrows.SaleEdit{
			Update: func() (bool, error) {
				return affected(tx.Exec(ctx, `UPDATE sales SET title = ?, hotel = ?, room_type = ?, price = ?,
					original_price = ?, currency = ?, starts_at_ms = ?, ends_at_ms = ?, per_user_limit = ?,
					hold_seconds = ?, purchase_token = ?, min_tier = ?, min_stays_30d = ?, channels = ?,
					limit_per_sale = ?, limit_per_user = ?, limit_per_ip = ?, challenge_difficulty = ?, price_tiers = ?, test = ?, time_zone = ?, waiting_room = ?, stay_rules = ?, kind = ?,
					description = ?, paused = ?, revision = revision + 1
					WHERE id = ? AND revision = ?`,
					append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
						sale.Currency, sqlrows.MS(sale.StartsAt), sqlrows.MS(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
						sale.PurchaseToken, string(sale.Eligibility.MinTier)}, rules.Args()...),
						sale.Description, sale.Paused, sale.ID, rev)...))
			},
			Exists: func() (bool, error) {
				return exists(ctx, tx, "SELECT EXISTS(SELECT 1 FROM sales WHERE id = ?)", sale.ID)
			},
			Units: func() ([]flashsale.Night, error) { return db.dialect.units(ctx, tx, sale.ID) },
			Nights: func(lock bool) ([]flashsale.NightStock, error) {
				return db.dialect.nightStocks(ctx, tx, sale.ID, lock)
			},
			Rewrite: func() error {
				if _, err := tx.Exec(ctx, "DELETE FROM nights WHERE sale_id = ?", sale.ID); err != nil {
					return err
				}
				return db.dialect.InsertNights(ctx, tx, sale)
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
func logChange(ctx context.Context, tx Querier, saleID string, c flashsale.SaleChange) error {
	_, err := tx.Exec(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES (?, ?, ?, ?, ?)`, saleID, sqlrows.MS(c.At), c.Kind, c.Revision, c.Detail)
	return err
}

// AdjustStock is flashsale.Store.AdjustStock: d.Delta rooms added to one
// night; see sqlrows.AdjustStock. The conditional UPDATE of the night is
// the guard: the stock stays within [held + sold, MaxStock] whatever runs
// beside it. Where the dialect has RETURNING, each UPDATE reads back what
// it wrote; elsewhere a SELECT of the row the UPDATE holds follows it.
func (db Store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s: %w", saleID, err)
	}
	var night *flashsale.NightStock
	err := db.inTx(ctx, "adjust_stock", func(tx Querier) (err error) {
		night, err = sqlrows.AdjustStock(sqlrows.StockChange{
			// The sale row first: see the lock order above.
			Bump: func() (rev int64, found bool, err error) {
				const bump = "UPDATE sales SET revision = revision + 1 WHERE id = ?"
				if db.dialect.Returning {
					return noRow(rev, tx.QueryRow(ctx, bump+" RETURNING revision", saleID).Scan(&rev))
				}
				if found, err = affected(tx.Exec(ctx, bump, saleID)); err != nil || !found {
					return 0, found, err
				}
				return rev, true, tx.QueryRow(ctx, "SELECT revision FROM sales WHERE id = ?", saleID).Scan(&rev)
			},
			Adjust: func() (n flashsale.NightStock, changed bool, err error) {
				update := `UPDATE nights SET stock = stock + ?
					WHERE sale_id = ? AND date = ` + db.dialect.DateArg + ` AND start_time = ? AND stock + ? >= held + sold AND stock + ? <= ?`
				args := []any{d.Delta, saleID, d.Date, d.Time, d.Delta, d.Delta, flashsale.MaxStock}
				counters := db.dialect.Date("date") + `, stock, held, sold`
				if db.dialect.Returning {
					return noRow(n, tx.QueryRow(ctx, update+` RETURNING `+counters, args...).Scan(&n.Date, &n.Stock, &n.Held, &n.Sold))
				}
				if changed, err = affected(tx.Exec(ctx, update, args...)); err != nil || !changed {
					return n, changed, err
				}
				return n, true, tx.QueryRow(ctx, `SELECT `+counters+` FROM nights WHERE sale_id = ? AND date = `+db.dialect.DateArg+` AND start_time = ?`,
					saleID, d.Date, d.Time).Scan(&n.Date, &n.Stock, &n.Held, &n.Sold)
			},
			Units: func() (n int, err error) {
				err = tx.QueryRow(ctx, "SELECT COUNT(*) FROM nights WHERE sale_id = ? AND date = "+db.dialect.DateArg+" AND start_time = ?",
					saleID, d.Date, d.Time).Scan(&n)
				return n, err
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
func affected(n int64, err error) (bool, error) { return n > 0, err }

// noRow turns a RETURNING statement's sql.ErrNoRows into found = false.
func noRow[T any](v T, err error) (T, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// exists runs a SELECT EXISTS query.
func exists(ctx context.Context, q Querier, query string, args ...any) (bool, error) {
	var found bool
	err := q.QueryRow(ctx, query, args...).Scan(&found)
	return found, err
}

// SaleChanges is flashsale.Store.SaleChanges: a sale's change log, oldest
// first, or ErrNotFound for an unknown sale.
func (db Store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	changes, err := queryRows(ctx, db.pool, func(rows sqlrows.Rows) ([]flashsale.SaleChange, error) {
		return sqlrows.SaleChanges(rows, saleID)
	}, `SELECT at_ms, kind, revision, detail FROM sale_changes WHERE sale_id = ? ORDER BY id`, saleID)
	if err == nil && len(changes) == 0 {
		err = SaleExists(ctx, db.pool, saleID)
	}
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, err)
	}
	return changes, nil
}

// SaleExists returns ErrNotFound when there is no such sale.
func SaleExists(ctx context.Context, q Querier, id string) error {
	found, err := exists(ctx, q, "SELECT EXISTS(SELECT 1 FROM sales WHERE id = ?)", id)
	if err == nil && !found {
		err = flashsale.ErrNotFound
	}
	return err
}
