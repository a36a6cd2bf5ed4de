package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// insertNights writes a sale's nights, counters zero, with one multi-row
// insert: a sale has at most MaxNights nights.
func insertNights(ctx context.Context, tx sqlstore.Querier, sale *flashsale.Sale) error {
	var q strings.Builder
	q.WriteString("INSERT INTO nights (sale_id, idx, date, stock, start_time, minutes) VALUES ")
	args := make([]any, 0, 6*len(sale.Nights))
	for i, n := range sale.Nights {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, sale.ID, i, n.Date, n.Stock, n.Time, n.Minutes)
	}
	_, err := tx.Exec(ctx, q.String(), args...)
	return err
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
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
	snap, err := dialect.Snapshot(ctx, sqlstore.SQL(tx, down), saleID)
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, down(err))
	}
	return snap, tx.Commit()
}
