package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The operator's changes of a sale run on the single writer, like every
// write: they never interleave with an order batch, so there is no lock
// order to keep, and the conditional updates decide exactly as they would
// under contention.

// ListSales returns up to q.Limit sales matching q, newest first, with
// their nights (one query for the page's sales, one for their nights).
func (s *Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	sales, err := s.listSales(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	return sales, nil
}

func (s *Store) listSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	f := sqlrows.NewFilter(false)
	if err := f.Sales(q); err != nil {
		return nil, err
	}
	// One read transaction, so the nights are those of the sales read.
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	sales, rules, err := scanSales(ctx, tx, f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...)
	if err != nil || len(sales) == 0 {
		return []*flashsale.Sale{}, err
	}
	ids := make([]any, len(sales))
	for i, sale := range sales {
		ids[i] = sale.ID
	}
	if err := addNights(ctx, tx, sales, rules, `SELECT sale_id, date, stock, start_time, minutes FROM nights
		WHERE sale_id IN (`+placeholders(len(ids), 1)+`) ORDER BY sale_id, idx`, ids...); err != nil {
		return nil, fmt.Errorf("nights: %w", err)
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store and sqlrows.UpdateSale. The conditional UPDATE is the
// guard.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	if err := s.updateSale(ctx, sale, rev, c); err != nil {
		return fmt.Errorf("update sale: sale=%s: %w", sale.ID, err)
	}
	sale.Revision = rev + 1
	return nil
}

func (s *Store) updateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	rules, err := sqlrows.RulesOf(sale)
	if err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	err = sqlrows.UpdateSale(sqlrows.SaleEdit{
		Update: func() (bool, error) {
			return affected(tx.ExecContext(ctx, `UPDATE sales SET title = ?, hotel = ?, room_type = ?, price = ?,
				original_price = ?, currency = ?, starts_at_ms = ?, ends_at_ms = ?, per_user_limit = ?,
				hold_seconds = ?, purchase_token = ?, min_tier = ?, min_stays_30d = ?, channels = ?,
				limit_per_sale = ?, limit_per_user = ?, limit_per_ip = ?, challenge_difficulty = ?, price_tiers = ?, test = ?, time_zone = ?, waiting_room = ?, stay_rules = ?, kind = ?,
				description = ?, paused = ?, revision = revision + 1
				WHERE id = ? AND revision = ?`,
				append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
					sale.Currency, ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
					sale.PurchaseToken, string(sale.Eligibility.MinTier)}, rules.Args()...),
					sale.Description, sale.Paused, sale.ID, rev)...))
		},
		Exists: func() (bool, error) { return exists(ctx, tx, `SELECT count(*) FROM sales WHERE id = ?`, sale.ID) },
		// The single writer holds the database: nothing moves a counter
		// meanwhile, so the locked read is the plain one.
		Units:  func() ([]flashsale.Night, error) { return units(ctx, tx, sale.ID) },
		Nights: func(bool) ([]flashsale.NightStock, error) { return nightStocks(ctx, tx, sale.ID) },
		Rewrite: func() error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM nights WHERE sale_id = ?`, sale.ID); err != nil {
				return err
			}
			return insertNights(ctx, tx, sale)
		},
		Log: func(c flashsale.SaleChange) error { return logChange(ctx, tx, sale.ID, c) },
	}, sale.Nights, rev, c)
	if err != nil {
		return err
	}
	return tx.Commit()
}

// logChange appends c to the sale's change log.
func logChange(ctx context.Context, tx *sql.Tx, saleID string, c flashsale.SaleChange) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES (?, ?, ?, ?, ?)`, saleID, ms(c.At), c.Kind, c.Revision, c.Detail)
	return err
}

// AdjustStock adds d.Delta rooms to one night; see flashsale.Store and
// sqlrows.AdjustStock. The conditional UPDATE of the night is the guard:
// the stock stays within [held + sold, MaxStock].
func (s *Store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s: %w", saleID, err)
	}
	night, err := s.adjustStock(ctx, saleID, d, c)
	if err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s night=%s: %w", saleID, d.Date, err)
	}
	return night, nil
}

func (s *Store) adjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	night, err := sqlrows.AdjustStock(sqlrows.StockChange{
		Bump: func() (rev int64, found bool, err error) {
			err = tx.QueryRowContext(ctx, `UPDATE sales SET revision = revision + 1 WHERE id = ? RETURNING revision`,
				saleID).Scan(&rev)
			return noRow(rev, err)
		},
		Adjust: func() (n flashsale.NightStock, changed bool, err error) {
			err = tx.QueryRowContext(ctx, `UPDATE nights SET stock = stock + ?
				WHERE sale_id = ? AND date = ? AND start_time = ? AND stock + ? >= held + sold AND stock + ? <= ?
				RETURNING date, stock, held, sold`,
				d.Delta, saleID, d.Date, d.Time, d.Delta, d.Delta, flashsale.MaxStock).Scan(&n.Date, &n.Stock, &n.Held, &n.Sold)
			return noRow(n, err)
		},
		Units: func() (n int, err error) {
			err = tx.QueryRowContext(ctx, `SELECT count(*) FROM nights WHERE sale_id = ? AND date = ? AND start_time = ?`, saleID, d.Date, d.Time).Scan(&n)
			return n, err
		},
		Log: func(c flashsale.SaleChange) error { return logChange(ctx, tx, saleID, c) },
	}, c)
	if err != nil {
		return nil, err
	}
	return night, tx.Commit()
}

// affected reports whether a statement changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// noRow turns a RETURNING statement's sql.ErrNoRows into found = false.
func noRow[T any](v T, err error) (T, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// exists runs a count(*) query and reports whether it counted a row.
func exists(ctx context.Context, q queryer, query string, args ...any) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, query, args...).Scan(&n)
	return n > 0, err
}

// saleExists returns ErrNotFound when there is no such sale.
func saleExists(ctx context.Context, q queryer, id string) error {
	found, err := exists(ctx, q, `SELECT count(*) FROM sales WHERE id = ?`, id)
	if err == nil && !found {
		err = flashsale.ErrNotFound
	}
	return err
}

// SaleChanges returns a sale's change log, oldest first, or ErrNotFound
// for an unknown sale.
func (s *Store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	changes, err := s.saleChanges(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("sale changes: sale=%s: %w", saleID, err)
	}
	return changes, nil
}

func (s *Store) saleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT at_ms, kind, revision, detail FROM sale_changes
		WHERE sale_id = ? ORDER BY id`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	changes, err := sqlrows.SaleChanges(rows, saleID)
	if err == nil && len(changes) == 0 {
		err = saleExists(ctx, s.read, saleID)
	}
	return changes, err
}
