package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	sqlite3 "modernc.org/sqlite/lib"
)

// CreateSale inserts a sale and its nights in one transaction. A sale ID
// that exists already is an EConflict error.
func (s *Store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	rules, err := sqlrows.RulesOf(sale)
	if err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO sales (id, title, hotel, room_type, price, original_price, currency,
		starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token, min_tier, created_at_ms,
		min_stays_30d, channels, limit_per_sale, limit_per_user, limit_per_ip, challenge_difficulty, price_tiers, test, time_zone, waiting_room, stay_rules, kind,
		description, paused, revision)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append(append([]any{sale.ID, sale.Title, sale.Hotel, sale.RoomType, sale.Price, sale.OriginalPrice, sale.Currency,
			ms(sale.StartsAt), ms(sale.EndsAt), sale.PerUserLimit, sale.HoldSeconds, sale.PurchaseToken,
			string(sale.Eligibility.MinTier), ms(sale.CreatedAt)}, rules.Args()...),
			sale.Description, sale.Paused, sale.Revision)...)
	if constraint(err) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return flashsale.Errorf(flashsale.EConflict, "sale %s already exists", sale.ID)
	} else if err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	if err := insertNights(ctx, tx, sale); err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create sale: sale=%s: %w", sale.ID, err)
	}
	return nil
}

// insertNights writes a sale's nights, counters zero.
func insertNights(ctx context.Context, tx *sql.Tx, sale *flashsale.Sale) error {
	for i, n := range sale.Nights {
		if _, err := tx.ExecContext(ctx, `INSERT INTO nights (sale_id, idx, date, stock, start_time, minutes) VALUES (?, ?, ?, ?, ?, ?)`,
			sale.ID, i, n.Date, n.Stock, n.Time, n.Minutes); err != nil {
			return fmt.Errorf("night=%d: %w", i, err)
		}
	}
	return nil
}

// Sale returns one sale with its nights, or ErrNotFound.
func (s *Store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sale: %w", err)
	}
	defer tx.Rollback()
	sale, err := findSale(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("sale: sale=%s: %w", id, err)
	}
	return sale, nil
}

// Sales returns the sales that end after now, by start time (then ID, so
// the order is stable).
func (s *Store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	// One read transaction, so a sale created meanwhile is seen with all
	// of its nights or not at all.
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	defer tx.Rollback()
	sales, rules, err := scanSales(ctx, tx, `WHERE ends_at_ms > ? ORDER BY starts_at_ms, id`, ms(now))
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	if err := addNights(ctx, tx, sales, rules, `SELECT n.sale_id, n.date, n.stock, n.start_time, n.minutes FROM nights n
		JOIN sales s ON s.id = n.sale_id WHERE s.ends_at_ms > ? ORDER BY n.sale_id, n.idx`, ms(now)); err != nil {
		return nil, fmt.Errorf("sales: nights: %w", err)
	}
	return sales, nil
}

// Revisions returns the revision of each sale that ends after now, by ID.
func (s *Store) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, revision FROM sales WHERE ends_at_ms > ?`, ms(now))
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	defer rows.Close()
	revs, err := sqlrows.Revisions(rows)
	if err != nil {
		return nil, fmt.Errorf("revisions: %w", err)
	}
	return revs, nil
}

// addNights gives sales their nights from a query of (sale_id, date,
// stock, start_time, minutes) rows in night order: one query for all of
// them, not one each.
// Then each sale's nights take their stay rules from the sale's rules
// (scanSales's, indexed as sales).
func addNights(ctx context.Context, q queryer, sales []*flashsale.Sale, rules []sqlrows.Rules, query string, args ...any) error {
	byID := make(map[string]*flashsale.Sale, len(sales))
	for _, sale := range sales {
		byID[sale.ID] = sale
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n flashsale.Night
		if err := rows.Scan(&id, &n.Date, &n.Stock, &n.Time, &n.Minutes); err != nil {
			return err
		}
		if sale := byID[id]; sale != nil {
			sale.Nights = append(sale.Nights, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, sale := range sales {
		if err := rules[i].ApplyNights(sale); err != nil {
			return fmt.Errorf("sale=%s: %w", sale.ID, err)
		}
	}
	return nil
}

// NightStocks returns a sale's counters in night order, or ErrNotFound (a
// sale always has at least one night).
func (s *Store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	nights, err := nightStocks(ctx, s.read, saleID)
	if err != nil {
		return nil, fmt.Errorf("night stocks: sale=%s: %w", saleID, err)
	}
	return nights, nil
}

// NightStocksOf returns the counters of each sale of saleIDs that exists,
// by ID: one query per sqlrows.Batch of them.
func (s *Store) NightStocksOf(ctx context.Context, saleIDs []string) (map[string][]flashsale.NightStock, error) {
	out := make(map[string][]flashsale.NightStock, len(saleIDs))
	for ids := range sqlrows.Batches(saleIDs) {
		rows, err := s.read.QueryContext(ctx, `SELECT sale_id, date, stock, held, sold FROM nights
			WHERE sale_id IN (`+sqlrows.Marks(len(ids))+`) ORDER BY sale_id, idx`, sqlrows.Args(ids)...)
		if err != nil {
			return nil, fmt.Errorf("night stocks of %d sales: %w", len(saleIDs), err)
		}
		err = sqlrows.SalesNightStocks(rows, out)
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("night stocks of %d sales: %w", len(saleIDs), err)
		}
	}
	return out, nil
}

func nightStocks(ctx context.Context, q queryer, saleID string) ([]flashsale.NightStock, error) {
	rows, err := q.QueryContext(ctx, `SELECT date, stock, held, sold FROM nights WHERE sale_id = ? ORDER BY idx`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.NightStocks(rows)
}

// units reads a sale's units as stored (sqlrows.Units).
func units(ctx context.Context, q queryer, saleID string) ([]flashsale.Night, error) {
	rows, err := q.QueryContext(ctx, `SELECT date, stock, start_time, minutes FROM nights WHERE sale_id = ? ORDER BY idx`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrows.Units(rows)
}

// findSale reads one sale and its nights.
func findSale(ctx context.Context, q queryer, id string) (*flashsale.Sale, error) {
	sales, rules, err := scanSales(ctx, q, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(sales) == 0 {
		return nil, flashsale.ErrNotFound
	}
	if err := addNights(ctx, q, sales, rules, `SELECT sale_id, date, stock, start_time, minutes FROM nights WHERE sale_id = ? ORDER BY idx`, id); err != nil {
		return nil, err
	}
	return sales[0], nil
}

// scanSales runs a query over sales with the given WHERE/ORDER tail. The
// sales come without their nights, with the rules read (indexed as the
// sales) for addNights to give the nights their stay rules.
func scanSales(ctx context.Context, q queryer, tail string, args ...any) ([]*flashsale.Sale, []sqlrows.Rules, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, title, hotel, room_type, price, original_price, currency,
		starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token, min_tier, created_at_ms,
		min_stays_30d, channels, limit_per_sale, limit_per_user, limit_per_ip, challenge_difficulty, price_tiers, test, time_zone, waiting_room, stay_rules, kind,
		description, paused, revision
		FROM sales `+tail, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		sales    []*flashsale.Sale
		allRules []sqlrows.Rules
	)
	for rows.Next() {
		var (
			sale                        flashsale.Sale
			startsAt, endsAt, createdAt int64
			token, paused               int64
			tier                        string
			rules                       sqlrows.Rules
		)
		if err := rows.Scan(append([]any{&sale.ID, &sale.Title, &sale.Hotel, &sale.RoomType, &sale.Price, &sale.OriginalPrice,
			&sale.Currency, &startsAt, &endsAt, &sale.PerUserLimit, &sale.HoldSeconds, &token, &tier, &createdAt},
			append(rules.Dest(), &sale.Description, &paused, &sale.Revision)...)...); err != nil {
			return nil, nil, err
		}
		sale.Paused = paused != 0
		sale.StartsAt, sale.EndsAt, sale.CreatedAt = sqlrows.FromMS(startsAt), sqlrows.FromMS(endsAt), sqlrows.FromMS(createdAt)
		sale.PurchaseToken = token != 0
		sale.Eligibility.MinTier = flashsale.Tier(tier)
		if err := rules.Apply(&sale); err != nil {
			return nil, nil, fmt.Errorf("sale=%s: %w", sale.ID, err)
		}
		sales, allRules = append(sales, &sale), append(allRules, rules)
	}
	return sales, allRules, rows.Err()
}

// errNoRows maps sql.ErrNoRows to ErrNotFound.
func errNoRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return flashsale.ErrNotFound
	}
	return err
}
