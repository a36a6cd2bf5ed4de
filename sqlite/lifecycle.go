package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
	var where []string
	var args []any
	nowMS := ms(q.Now)
	switch q.Status {
	case "":
	case flashsale.SaleUpcoming:
		where = append(where, "starts_at_ms > ? AND ends_at_ms > ?")
		args = append(args, nowMS, nowMS)
	case flashsale.SaleActive, flashsale.SaleSoldOut:
		where = append(where, "starts_at_ms <= ? AND ends_at_ms > ? AND paused = 0")
		args = append(args, nowMS, nowMS)
	case flashsale.SalePaused:
		where = append(where, "starts_at_ms <= ? AND ends_at_ms > ? AND paused != 0")
		args = append(args, nowMS, nowMS)
	case flashsale.SaleEnded:
		where = append(where, "ends_at_ms <= ?")
		args = append(args, nowMS)
	default:
		return nil, fmt.Errorf("list sales: %w", flashsale.Errorf(flashsale.EInvalid, "unknown sale status %q", q.Status))
	}
	if q.Hotel != "" {
		where = append(where, "hotel = ?")
		args = append(args, q.Hotel)
	}
	if q.Before != "" {
		where = append(where, "id < ?")
		args = append(args, q.Before)
	}
	cond := ""
	if len(where) > 0 {
		cond = "WHERE " + strings.Join(where, " AND ")
	}
	// One read transaction, so the nights are those of the sales read.
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	defer tx.Rollback()
	sales, err := scanSales(ctx, tx, cond+` ORDER BY id DESC LIMIT ?`, append(args, sqlrows.PageLimit(q.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	if len(sales) == 0 {
		return []*flashsale.Sale{}, nil
	}
	ids := make([]any, len(sales))
	for i, sale := range sales {
		ids[i] = sale.ID
	}
	if err := addNights(ctx, tx, sales, `SELECT sale_id, date, stock FROM nights
		WHERE sale_id IN (`+placeholders(len(ids), 1)+`) ORDER BY sale_id, idx`, ids...); err != nil {
		return nil, fmt.Errorf("list sales: nights: %w", err)
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store. The conditional UPDATE is the guard.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	if err := s.updateSale(ctx, sale, rev, c); err != nil {
		return fmt.Errorf("update sale: sale=%s: %w", sale.ID, err)
	}
	sale.Revision = rev + 1
	return nil
}

func (s *Store) updateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rules := sqlrows.RulesOf(sale)
	res, err := tx.ExecContext(ctx, `UPDATE sales SET title = ?, hotel = ?, room_type = ?, price = ?,
		original_price = ?, currency = ?, starts_at_ms = ?, ends_at_ms = ?, per_user_limit = ?, hold_seconds = ?,
		purchase_token = ?, min_tier = ?, min_stays_30d = ?, channels = ?, limit_per_sale = ?, limit_per_user = ?,
		limit_per_ip = ?, challenge_difficulty = ?, description = ?, paused = ?, revision = revision + 1
		WHERE id = ? AND revision = ?`,
		append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice, sale.Currency,
			ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds, sale.PurchaseToken,
			string(sale.Eligibility.MinTier)}, rules.Args()...),
			sale.Description, sale.Paused, sale.ID, rev)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		if err := saleExists(ctx, tx, sale.ID); err != nil {
			return err
		}
		return flashsale.ErrStale
	}
	stored, err := nightStocks(ctx, tx, sale.ID)
	if err != nil {
		return err
	}
	if sqlrows.NightsChanged(stored, sale.Nights) {
		if sqlrows.InUse(stored) {
			return flashsale.ErrStockInUse
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM nights WHERE sale_id = ?`, sale.ID); err != nil {
			return err
		}
		if err := insertNights(ctx, tx, sale); err != nil {
			return err
		}
	}
	c.Revision = rev + 1
	if err := logChange(ctx, tx, sale.ID, c); err != nil {
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

// saleExists returns ErrNotFound when there is no such sale.
func saleExists(ctx context.Context, q queryer, id string) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sales WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return flashsale.ErrNotFound
	}
	return nil
}

// AdjustStock adds d.Delta rooms to one night; see flashsale.Store. The
// conditional UPDATE of the night is the guard: the stock stays within
// [held + sold, MaxStock].
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
	err = tx.QueryRowContext(ctx, `UPDATE sales SET revision = revision + 1 WHERE id = ? RETURNING revision`,
		saleID).Scan(&c.Revision)
	if err != nil {
		return nil, errNoRows(err)
	}
	var night flashsale.NightStock
	err = tx.QueryRowContext(ctx, `UPDATE nights SET stock = stock + ?
		WHERE sale_id = ? AND date = ? AND stock + ? >= held + sold AND stock + ? <= ?
		RETURNING date, stock, held, sold`,
		d.Delta, saleID, d.Date, d.Delta, d.Delta, flashsale.MaxStock).Scan(&night.Date, &night.Stock, &night.Held, &night.Sold)
	if errors.Is(err, sql.ErrNoRows) {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM nights WHERE sale_id = ? AND date = ?`,
			saleID, d.Date).Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, flashsale.ErrNotFound
		}
		return nil, flashsale.ErrStockInUse
	} else if err != nil {
		return nil, err
	}
	night.Available = night.Stock - night.Held - night.Sold
	if err := logChange(ctx, tx, saleID, c); err != nil {
		return nil, err
	}
	return &night, tx.Commit()
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
