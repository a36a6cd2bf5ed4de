package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// querier is what *pgxpool.Pool and pgx.Tx have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// insertNights writes a sale's nights, counters zero, with one statement:
// arrays unnested side by side.
func insertNights(ctx context.Context, tx sqlstore.Querier, sale *flashsale.Sale) error {
	idx := make([]int32, len(sale.Nights))
	dates := make([]string, len(sale.Nights))
	stocks := make([]int32, len(sale.Nights))
	times := make([]string, len(sale.Nights))
	minutes := make([]int32, len(sale.Nights))
	for i, n := range sale.Nights {
		idx[i], dates[i], stocks[i] = int32(i), n.Date, int32(n.Stock)
		times[i], minutes[i] = n.Time, int32(n.Minutes)
	}
	_, err := tx.Exec(ctx, `INSERT INTO nights (sale_id, idx, date, stock, start_time, minutes)
		SELECT ?, i, d::date, st, t, m FROM unnest(?::int[], ?::text[], ?::int[], ?::text[], ?::int[]) AS n(i, d, st, t, m)`,
		sale.ID, idx, dates, stocks, times, minutes)
	return err
}

// Snapshot reads a sale, its counters and every one of its orders in one
// read-only REPEATABLE READ transaction, so the counters and the
// reservations are from the same moment and agree with each other.
func (s *Store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	var snap *flashsale.StockSnapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) (err error) {
			snap, err = dialect.Snapshot(ctx, pgq{tx}, saleID)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, err)
	}
	return snap, nil
}
