package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// Beat is flashsale.ModeBoard.Beat: the sell mode read under a shared
// lock and the instance's part written, with its lease judged by the
// database's clock, in one transaction that is not retried (the next beat
// is).
func (db Store) Beat(ctx context.Context, p flashsale.SellPart, lease time.Duration) (flashsale.SellMode, error) {
	var m flashsale.SellMode
	err := db.tx(ctx, func(tx Querier) error {
		if err := tx.QueryRow(ctx, "SELECT phase, epoch FROM sell_mode WHERE id = 1 "+db.dialect.ForShare).
			Scan(&m.Phase, &m.Epoch); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO sell_parts (instance, phase, epoch, selling, expires_at_ms)
			VALUES (?, ?, ?, ?, `+db.dialect.NowMS+` + ?) `+db.dialect.UpsertPart,
			p.Instance, string(p.Mode.Phase), p.Mode.Epoch, string(p.Selling), lease.Milliseconds())
		return err
	})
	if err != nil {
		return flashsale.SellMode{}, fmt.Errorf("sell mode beat: %w", err)
	}
	return m, nil
}

// Move is flashsale.ModeBoard.Move.
func (db Store) Move(ctx context.Context, from, to flashsale.SellMode) (bool, error) {
	n, err := db.pool.Exec(ctx, `UPDATE sell_mode SET phase = ?, epoch = ?, changed_at_ms = `+db.dialect.NowMS+`
		WHERE id = 1 AND phase = ? AND epoch = ?`, string(to.Phase), to.Epoch, string(from.Phase), from.Epoch)
	if err != nil {
		return false, fmt.Errorf("sell mode move: %w", err)
	}
	return n == 1, nil
}

// Parts is flashsale.ModeBoard.Parts.
func (db Store) Parts(ctx context.Context) ([]flashsale.SellPart, time.Time, error) {
	var now int64
	if err := db.pool.QueryRow(ctx, "SELECT "+db.dialect.NowMS).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", err)
	}
	parts, err := func() ([]flashsale.SellPart, error) {
		rows, err := db.pool.Query(ctx, "SELECT instance, phase, epoch, selling, expires_at_ms FROM sell_parts")
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var parts []flashsale.SellPart
		for rows.Next() {
			var (
				p   flashsale.SellPart
				exp int64
			)
			if err := rows.Scan(&p.Instance, &p.Mode.Phase, &p.Mode.Epoch, &p.Selling, &exp); err != nil {
				return nil, err
			}
			p.Expires = time.UnixMilli(exp)
			parts = append(parts, p)
		}
		return parts, rows.Err()
	}()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", err)
	}
	return parts, time.UnixMilli(now), nil
}
