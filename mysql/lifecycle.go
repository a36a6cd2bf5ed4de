package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
// sale row, so a change holding the sale while it waits for a night they
// hold waits for nothing that waits for it. Two changes of one sale take
// turns on the sale row.

// ListSales returns up to q.Limit sales matching q, newest first, with
// their nights: one query, the page of sale IDs chosen in a derived table.
func (s *Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	var where []string
	var args []any
	nowMS := q.Now.UnixMilli()
	switch q.Status {
	case "":
	case flashsale.SaleUpcoming:
		where = append(where, "starts_at_ms > ? AND ends_at_ms > ?")
		args = append(args, nowMS, nowMS)
	case flashsale.SaleActive, flashsale.SaleSoldOut:
		where = append(where, "starts_at_ms <= ? AND ends_at_ms > ? AND NOT paused")
		args = append(args, nowMS, nowMS)
	case flashsale.SalePaused:
		where = append(where, "starts_at_ms <= ? AND ends_at_ms > ? AND paused")
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
	args = append(args, sqlrows.PageLimit(q.Limit))
	sales, err := querySales(ctx, s.db, `SELECT `+saleColumns+` FROM
		(SELECT id FROM sales `+cond+` ORDER BY id DESC LIMIT ?) AS page
		JOIN sales s ON s.id = page.id JOIN nights n ON n.sale_id = s.id
		ORDER BY s.id DESC, n.idx`, args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", down(err))
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store. The conditional UPDATE is the guard, so of two editors
// of one revision exactly one wins.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	err := s.inTx(ctx, "update_sale", func(tx *sql.Tx) error {
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
		if err := expectRows(res, err)(1, errNoRevision); errors.Is(err, errNoRevision) {
			return staleOrMissing(ctx, tx, sale.ID)
		} else if err != nil {
			return err
		}
		if err := rewriteNights(ctx, tx, sale); err != nil {
			return err
		}
		c.Revision = rev + 1
		return logChange(ctx, tx, sale.ID, c)
	})
	if err != nil {
		return fmt.Errorf("update sale: sale=%s: %w", sale.ID, err)
	}
	sale.Revision = rev + 1
	return nil
}

// errNoRevision is UpdateSale's conditional update finding no row.
var errNoRevision = errors.New("no sale at this revision")

// staleOrMissing tells an edit of an old revision from one of no sale.
func staleOrMissing(ctx context.Context, tx *sql.Tx, id string) error {
	if err := saleExists(ctx, tx, id); err != nil {
		return err
	}
	return flashsale.ErrStale
}

// rewriteNights replaces the sale's nights with sale.Nights when their
// dates or stocks differ, only while no room of them is held or sold. The
// caller holds the sale row, so nothing else changes a date or a stock
// meanwhile and the plain read decides whether to rewrite; the counters
// are read again under lock, as a payment may move them without the sale.
func rewriteNights(ctx context.Context, tx *sql.Tx, sale *flashsale.Sale) error {
	stored, err := queryNightStocks(ctx, tx, sale.ID)
	if err != nil {
		return err
	}
	if !sqlrows.NightsChanged(stored, sale.Nights) {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT DATE_FORMAT(date, '%Y-%m-%d'), stock, held, sold
		FROM nights WHERE sale_id = ? ORDER BY idx FOR UPDATE`, sale.ID)
	if err != nil {
		return err
	}
	locked, err := sqlrows.NightStocks(rows)
	rows.Close()
	if err != nil {
		return err
	}
	if sqlrows.InUse(locked) {
		return flashsale.ErrStockInUse
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM nights WHERE sale_id = ?", sale.ID); err != nil {
		return err
	}
	return insertNights(ctx, tx, sale)
}

// logChange appends c to the sale's change log.
func logChange(ctx context.Context, tx *sql.Tx, saleID string, c flashsale.SaleChange) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES (?, ?, ?, ?, ?)`, saleID, ms(c.At), c.Kind, c.Revision, c.Detail)
	return err
}

// AdjustStock adds d.Delta rooms to one night; see flashsale.Store. The
// conditional UPDATE of the night is the guard: the stock stays within
// [held + sold, MaxStock] whatever runs beside it.
func (s *Store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s: %w", saleID, err)
	}
	var night flashsale.NightStock
	err := s.inTx(ctx, "adjust_stock", func(tx *sql.Tx) error {
		// The sale row first: see the lock order above.
		if err := expectRows(tx.ExecContext(ctx, "UPDATE sales SET revision = revision + 1 WHERE id = ?", saleID))(1,
			flashsale.ErrNotFound); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE nights SET stock = stock + ?
			WHERE sale_id = ? AND date = ? AND stock + ? >= held + sold AND stock + ? <= ?`,
			d.Delta, saleID, d.Date, d.Delta, d.Delta, flashsale.MaxStock)
		if err := expectRows(res, err)(1, flashsale.ErrStockInUse); errors.Is(err, flashsale.ErrStockInUse) {
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM nights WHERE sale_id = ? AND date = ?",
				saleID, d.Date).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return flashsale.ErrNotFound
			}
			return flashsale.ErrStockInUse
		} else if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT DATE_FORMAT(n.date, '%Y-%m-%d'), n.stock, n.held, n.sold, s.revision
			FROM nights n JOIN sales s ON s.id = n.sale_id WHERE n.sale_id = ? AND n.date = ?`, saleID, d.Date).Scan(
			&night.Date, &night.Stock, &night.Held, &night.Sold, &c.Revision); err != nil {
			return err
		}
		night.Available = night.Stock - night.Held - night.Sold
		return logChange(ctx, tx, saleID, c)
	})
	if err != nil {
		return nil, fmt.Errorf("adjust stock: sale=%s night=%s: %w", saleID, d.Date, err)
	}
	return &night, nil
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
	var n int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM sales WHERE id = ?", id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return flashsale.ErrNotFound
	}
	return nil
}
