package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/jackc/pgx/v5"
)

var _ flashsale.ModeBoard = (*Store)(nil)

// nowMS is the database's clock in unix milliseconds: leases are judged by
// one clock, whatever the instances' say. clock_timestamp, not now(): now()
// is the transaction's start.
const nowMS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

// Beat implements flashsale.ModeBoard.
func (s *Store) Beat(ctx context.Context, p flashsale.SellPart, lease time.Duration) (flashsale.SellMode, error) {
	var m flashsale.SellMode
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT phase, epoch FROM sell_mode WHERE id = 1 FOR SHARE").Scan(&m.Phase, &m.Epoch); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO sell_parts (instance, phase, epoch, selling, expires_at_ms)
			VALUES ($1, $2, $3, $4, `+nowMS+` + $5)
			ON CONFLICT (instance) DO UPDATE SET phase = excluded.phase, epoch = excluded.epoch,
				selling = excluded.selling, expires_at_ms = excluded.expires_at_ms`,
			p.Instance, string(p.Mode.Phase), p.Mode.Epoch, string(p.Selling), lease.Milliseconds())
		return err
	})
	if err != nil {
		return flashsale.SellMode{}, fmt.Errorf("sell mode beat: %w", err)
	}
	return m, nil
}

// Move implements flashsale.ModeBoard.
func (s *Store) Move(ctx context.Context, from, to flashsale.SellMode) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sell_mode SET phase = $1, epoch = $2, changed_at_ms = `+nowMS+`
		WHERE id = 1 AND phase = $3 AND epoch = $4`, string(to.Phase), to.Epoch, string(from.Phase), from.Epoch)
	if err != nil {
		return false, fmt.Errorf("sell mode move: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Parts implements flashsale.ModeBoard.
func (s *Store) Parts(ctx context.Context) ([]flashsale.SellPart, time.Time, error) {
	var now int64
	if err := s.pool.QueryRow(ctx, "SELECT "+nowMS).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", err)
	}
	rows, err := s.pool.Query(ctx, "SELECT instance, phase, epoch, selling, expires_at_ms FROM sell_parts")
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (flashsale.SellPart, error) {
		var (
			p   flashsale.SellPart
			exp int64
		)
		err := row.Scan(&p.Instance, &p.Mode.Phase, &p.Mode.Epoch, &p.Selling, &exp)
		p.Expires = time.UnixMilli(exp)
		return p, err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", err)
	}
	return parts, time.UnixMilli(now), nil
}
