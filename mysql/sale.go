package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// CreateSale inserts a sale and its nights in one transaction. A sale
// without a creation time is stamped now (and s is updated to match what was
// stored). An existing ID is ErrDuplicate.
func (s *Store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	if err := sale.Validate(); err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	if sale.CreatedAt.IsZero() {
		sale.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	}
	err := s.inTx(ctx, "create_sale", func(tx *sql.Tx) error {
		rules := sqlrows.RulesOf(sale)
		_, err := tx.ExecContext(ctx, `INSERT INTO sales (id, title, hotel, room_type, price, original_price,
			currency, starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token, min_tier, created_at_ms,
			min_stays_30d, channels, limit_per_sale, limit_per_user, limit_per_ip, challenge_difficulty, price_tiers, test,
			description, paused, revision)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append(append([]any{sale.ID, sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice,
				sale.Currency, ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds,
				sale.PurchaseToken, string(sale.Eligibility.MinTier), ms(sale.CreatedAt)}, rules.Args()...),
				sale.Description, sale.Paused, sale.Revision)...)
		if isDuplicate(err) {
			return flashsale.ErrDuplicate
		}
		if err != nil {
			return err
		}
		return insertNights(ctx, tx, sale)
	})
	if err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	return nil
}

// insertNights writes a sale's nights, counters zero, with one multi-row
// insert: a sale has at most MaxNights nights.
func insertNights(ctx context.Context, tx *sql.Tx, sale *flashsale.Sale) error {
	var q strings.Builder
	q.WriteString("INSERT INTO nights (sale_id, idx, date, stock) VALUES ")
	args := make([]any, 0, 4*len(sale.Nights))
	for i, n := range sale.Nights {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, sale.ID, i, n.Date, n.Stock)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// saleColumns joins a sale with its nights: one row per night, in night order.
const saleColumns = `s.id, s.title, s.hotel, s.room_type, s.price, s.original_price, s.currency,
	s.starts_at_ms, s.ends_at_ms, s.per_user_limit, s.hold_seconds, s.purchase_token, s.min_tier,
	s.created_at_ms, s.min_stays_30d, s.channels, s.limit_per_sale, s.limit_per_user, s.limit_per_ip,
	s.challenge_difficulty, s.price_tiers, s.test, s.description, s.paused, s.revision, DATE_FORMAT(n.date, '%Y-%m-%d'), n.stock`

// Sale returns one sale with its nights, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	sales, err := querySales(ctx, s.db, `SELECT `+saleColumns+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.id = ? ORDER BY n.idx`, id)
	if err != nil {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, down(err))
	}
	if len(sales) == 0 {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, flashsale.ErrNotFound)
	}
	return sales[0], nil
}

// Sales returns the sales that end after now, ordered by start time (then
// ID, so the order is stable).
func (s *Store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	sales, err := querySales(ctx, s.db, `SELECT `+saleColumns+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.ends_at_ms > ?
		ORDER BY s.starts_at_ms, s.id, n.idx`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sales: %w", down(err))
	}
	return sales, nil
}

// querySales scans sale-night rows, grouped by sale, into sales.
func querySales(ctx context.Context, q querier, query string, args ...any) ([]*flashsale.Sale, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.Sales(rows)
}

// NightStocks returns the counters of each night of a sale, in night order,
// or ErrNotFound for an unknown sale.
func (s *Store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	nights, err := queryNightStocks(ctx, s.db, saleID)
	if err != nil {
		return nil, fmt.Errorf("night stocks: sale=%s: %w", saleID, down(err))
	}
	return nights, nil
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func queryNightStocks(ctx context.Context, q querier, saleID string) ([]flashsale.NightStock, error) {
	rows, err := q.QueryContext(ctx, `SELECT DATE_FORMAT(date, '%Y-%m-%d'), stock, held, sold
		FROM nights WHERE sale_id = ? ORDER BY idx`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.NightStocks(rows)
}

// Snapshot reads a sale, its counters and every one of its orders from one
// consistent snapshot (a read-only REPEATABLE READ transaction), so the
// counters and the reservations agree with each other.
func (s *Store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, down(err))
	}
	defer tx.Rollback()
	snap, err := snapshot(ctx, tx, saleID)
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, down(err))
	}
	return snap, tx.Commit()
}

func snapshot(ctx context.Context, tx *sql.Tx, saleID string) (*flashsale.StockSnapshot, error) {
	// The first read fixes the snapshot; read the orders first so that the
	// later reads see the same moment.
	orders, err := queryOrders(ctx, tx, `WHERE o.sale_id = ? ORDER BY o.created_at_ms, o.id`, saleID)
	if err != nil {
		return nil, err
	}
	sales, err := querySales(ctx, tx, `SELECT `+saleColumns+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.id = ? ORDER BY n.idx`, saleID)
	if err != nil {
		return nil, err
	}
	if len(sales) == 0 {
		return nil, flashsale.ErrNotFound
	}
	sale := sales[0]
	nights, err := queryNightStocks(ctx, tx, saleID)
	if err != nil {
		return nil, err
	}
	snap := &flashsale.StockSnapshot{Sale: sale, Nights: nights, Reservations: make([]flashsale.Reservation, len(orders))}
	for i, o := range orders {
		snap.Reservations[i] = o.Reservation()
	}
	return snap, nil
}
