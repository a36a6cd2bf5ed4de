package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The operator's changes of a sale: UpdateSale and AdjustStock.
//
// Lock order: the sale row first, then its nights. PlaceOrders locks every
// night of its sales and Transition and ExpireHolds lock orders, nights and
// users, and none of them locks a sale row (they read it without a lock),
// so a change holding the sale while it waits for a night waits for
// nothing that waits for it; two changes of one sale take turns on the
// sale row before either touches a night. The MySQL store takes the same
// order, which its PlaceOrders requires (it locks sale rows before nights).

// ListSales returns up to q.Limit sales matching q, newest first, with
// their nights: one query, the page of sale IDs chosen in a subquery.
func (s *Store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	switch q.Status {
	case "":
	case flashsale.SaleUpcoming:
		now := arg(q.Now.UnixMilli())
		where = append(where, "starts_at_ms > "+now+" AND ends_at_ms > "+now)
	case flashsale.SaleActive, flashsale.SaleSoldOut:
		now := arg(q.Now.UnixMilli())
		where = append(where, "starts_at_ms <= "+now+" AND ends_at_ms > "+now+" AND NOT paused")
	case flashsale.SalePaused:
		now := arg(q.Now.UnixMilli())
		where = append(where, "starts_at_ms <= "+now+" AND ends_at_ms > "+now+" AND paused")
	case flashsale.SaleEnded:
		where = append(where, "ends_at_ms <= "+arg(q.Now.UnixMilli()))
	default:
		return nil, fmt.Errorf("list sales: %w", flashsale.Errorf(flashsale.EInvalid, "unknown sale status %q", q.Status))
	}
	if q.Hotel != "" {
		where = append(where, "hotel = "+arg(q.Hotel))
	}
	if q.Before != "" {
		where = append(where, "id < "+arg(q.Before))
	}
	cond := ""
	if len(where) > 0 {
		cond = "WHERE " + strings.Join(where, " AND ")
	}
	limit := arg(sqlrows.PageLimit(q.Limit))
	sales, err := querySales(ctx, s.pool, `SELECT `+saleColumns+` FROM
		(SELECT id FROM sales `+cond+` ORDER BY id DESC LIMIT `+limit+`) AS page
		JOIN sales s ON s.id = page.id JOIN nights n ON n.sale_id = s.id
		ORDER BY s.id DESC, n.idx`, args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	return sales, nil
}

// UpdateSale replaces a sale's fields if its revision is still rev; see
// flashsale.Store. The conditional UPDATE is the guard, so of two editors
// of one revision exactly one wins.
func (s *Store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	err := s.inTx(ctx, "update_sale", func(tx pgx.Tx) error {
		rules := sqlrows.RulesOf(sale)
		tag, err := tx.Exec(ctx, `UPDATE sales SET title = $1, hotel = $2, room_type = $3, price = $4,
			original_price = $5, currency = $6, starts_at_ms = $7, ends_at_ms = $8, per_user_limit = $9,
			hold_seconds = $10, purchase_token = $11, min_tier = $12, min_stays_30d = $13, channels = $14,
			limit_per_sale = $15, limit_per_user = $16, limit_per_ip = $17, challenge_difficulty = $18,
			description = $19, paused = $20, revision = revision + 1
			WHERE id = $21 AND revision = $22`,
			append(append([]any{sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice, sale.Currency,
				ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds, sale.PurchaseToken,
				string(sale.Eligibility.MinTier)}, rules.Args()...),
				sale.Description, sale.Paused, sale.ID, rev)...)
		if err := expectRows(tag, err)(1, errNoRevision); errors.Is(err, errNoRevision) {
			if err := saleExists(ctx, tx, sale.ID); err != nil {
				return err
			}
			return flashsale.ErrStale
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

// rewriteNights replaces the sale's nights with sale.Nights when their
// dates or stocks differ, only while no room of them is held or sold. The
// caller holds the sale row, so nothing else changes a date or a stock
// meanwhile and the plain read decides whether to rewrite; the counters
// are read again under lock, as a payment may move them without the sale.
func rewriteNights(ctx context.Context, tx pgx.Tx, sale *flashsale.Sale) error {
	stored, err := queryNightStocks(ctx, tx, sale.ID)
	if err != nil {
		return err
	}
	if !sqlrows.NightsChanged(stored, sale.Nights) {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT to_char(date, 'YYYY-MM-DD'), stock, held, sold
		FROM nights WHERE sale_id = $1 ORDER BY idx FOR UPDATE`, sale.ID)
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
	if _, err := tx.Exec(ctx, "DELETE FROM nights WHERE sale_id = $1", sale.ID); err != nil {
		return err
	}
	return insertNights(ctx, tx, sale)
}

// logChange appends c to the sale's change log.
func logChange(ctx context.Context, tx pgx.Tx, saleID string, c flashsale.SaleChange) error {
	_, err := tx.Exec(ctx, `INSERT INTO sale_changes (sale_id, at_ms, kind, revision, detail)
		VALUES ($1, $2, $3, $4, $5)`, saleID, ms(c.At), c.Kind, c.Revision, c.Detail)
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
	err := s.inTx(ctx, "adjust_stock", func(tx pgx.Tx) error {
		// The sale row first: see the lock order above.
		if err := tx.QueryRow(ctx, "UPDATE sales SET revision = revision + 1 WHERE id = $1 RETURNING revision",
			saleID).Scan(&c.Revision); errors.Is(err, pgx.ErrNoRows) {
			return flashsale.ErrNotFound
		} else if err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE nights SET stock = stock + $1
			WHERE sale_id = $2 AND date = $3::date AND stock + $1 >= held + sold AND stock + $1 <= $4
			RETURNING to_char(date, 'YYYY-MM-DD'), stock, held, sold`,
			d.Delta, saleID, d.Date, flashsale.MaxStock).Scan(&night.Date, &night.Stock, &night.Held, &night.Sold)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS(SELECT 1 FROM nights WHERE sale_id = $1 AND date = $2::date)",
				saleID, d.Date).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return flashsale.ErrNotFound
			}
			return flashsale.ErrStockInUse
		} else if err != nil {
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
	var exists bool
	if err := q.QueryRow(ctx, "SELECT EXISTS(SELECT 1 FROM sales WHERE id = $1)", id).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return flashsale.ErrNotFound
	}
	return nil
}
