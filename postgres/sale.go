package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// querier is what *pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

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
	err := s.inTx(ctx, "create_sale", func(tx pgx.Tx) error {
		rules := sqlrows.RulesOf(sale)
		_, err := tx.Exec(ctx, `INSERT INTO sales (id, title, hotel, room_type, price, original_price,
			currency, starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token, min_tier, created_at_ms,
			min_stays_30d, channels, limit_per_sale, limit_per_user, limit_per_ip, challenge_difficulty, price_tiers, test,
			description, paused, revision)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
			$21, $22, $23, $24, $25)`,
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

// insertNights writes a sale's nights, counters zero, with one statement:
// arrays unnested side by side.
func insertNights(ctx context.Context, tx pgx.Tx, sale *flashsale.Sale) error {
	idx := make([]int32, len(sale.Nights))
	dates := make([]string, len(sale.Nights))
	stocks := make([]int32, len(sale.Nights))
	for i, n := range sale.Nights {
		idx[i], dates[i], stocks[i] = int32(i), n.Date, int32(n.Stock)
	}
	_, err := tx.Exec(ctx, `INSERT INTO nights (sale_id, idx, date, stock)
		SELECT $1, i, d::date, st FROM unnest($2::int[], $3::text[], $4::int[]) AS n(i, d, st)`,
		sale.ID, idx, dates, stocks)
	return err
}

// saleColumns joins a sale with its nights: one row per night, in night order.
const saleColumns = `s.id, s.title, s.hotel, s.room_type, s.price, s.original_price, s.currency,
	s.starts_at_ms, s.ends_at_ms, s.per_user_limit, s.hold_seconds, s.purchase_token, s.min_tier,
	s.created_at_ms, s.min_stays_30d, s.channels, s.limit_per_sale, s.limit_per_user, s.limit_per_ip,
	s.challenge_difficulty, s.price_tiers, s.test, s.description, s.paused, s.revision, to_char(n.date, 'YYYY-MM-DD'), n.stock`

// Sale returns one sale with its nights, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	sales, err := querySales(ctx, s.pool, `SELECT `+saleColumns+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.id = $1 ORDER BY n.idx`, id)
	if err != nil {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, err)
	}
	if len(sales) == 0 {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, flashsale.ErrNotFound)
	}
	return sales[0], nil
}

// Sales returns the sales that end after now, ordered by start time (then
// ID, so the order is stable).
func (s *Store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	sales, err := querySales(ctx, s.pool, `SELECT `+saleColumns+` FROM sales s
		JOIN nights n ON n.sale_id = s.id WHERE s.ends_at_ms > $1
		ORDER BY s.starts_at_ms, s.id, n.idx`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	return sales, nil
}

// querySales scans sale-night rows, grouped by sale, into sales.
func querySales(ctx context.Context, q querier, query string, args ...any) ([]*flashsale.Sale, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.Sales(rows)
}

// NightStocks returns the counters of each night of a sale, in night order,
// or ErrNotFound for an unknown sale.
func (s *Store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	nights, err := queryNightStocks(ctx, s.pool, saleID)
	if err != nil {
		return nil, fmt.Errorf("night stocks: sale=%s: %w", saleID, err)
	}
	return nights, nil
}

func queryNightStocks(ctx context.Context, q querier, saleID string) ([]flashsale.NightStock, error) {
	rows, err := q.Query(ctx, `SELECT to_char(date, 'YYYY-MM-DD'), stock, held, sold
		FROM nights WHERE sale_id = $1 ORDER BY idx`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.NightStocks(rows)
}

// Snapshot reads a sale, its counters and every one of its orders in one
// read-only REPEATABLE READ transaction, so the counters and the
// reservations are from the same moment and agree with each other.
func (s *Store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	var snap *flashsale.StockSnapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			sales, err := querySales(ctx, tx, `SELECT `+saleColumns+` FROM sales s
				JOIN nights n ON n.sale_id = s.id WHERE s.id = $1 ORDER BY n.idx`, saleID)
			if err != nil {
				return err
			}
			if len(sales) == 0 {
				return flashsale.ErrNotFound
			}
			nights, err := queryNightStocks(ctx, tx, saleID)
			if err != nil {
				return err
			}
			orders, err := queryOrders(ctx, tx, `WHERE o.sale_id = $1 ORDER BY o.created_at_ms, o.id`, saleID)
			if err != nil {
				return err
			}
			snap = &flashsale.StockSnapshot{Sale: sales[0], Nights: nights, Reservations: make([]flashsale.Reservation, len(orders))}
			for i, o := range orders {
				snap.Reservations[i] = o.Reservation()
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, err)
	}
	return snap, nil
}
