package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

var _ flashsale.ModeBoard = (*Store)(nil)

// nowMS is the database's clock in unix milliseconds: leases are judged by
// one clock, whatever the instances' say.
const nowMS = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"

// Beat implements flashsale.ModeBoard.
func (s *Store) Beat(ctx context.Context, p flashsale.SellPart, lease time.Duration) (flashsale.SellMode, error) {
	var m flashsale.SellMode
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx,
			"SELECT phase, epoch FROM sell_mode WHERE id = 1 LOCK IN SHARE MODE").Scan(&m.Phase, &m.Epoch); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sell_parts (instance, phase, epoch, selling, expires_at_ms)
			VALUES (?, ?, ?, ?, `+nowMS+` + ?)
			ON DUPLICATE KEY UPDATE phase = VALUES(phase), epoch = VALUES(epoch),
				selling = VALUES(selling), expires_at_ms = VALUES(expires_at_ms)`,
			p.Instance, p.Mode.Phase, p.Mode.Epoch, p.Selling, lease.Milliseconds())
		return err
	})
	if err != nil {
		return flashsale.SellMode{}, fmt.Errorf("sell mode beat: %w", err)
	}
	return m, nil
}

// Move implements flashsale.ModeBoard.
func (s *Store) Move(ctx context.Context, from, to flashsale.SellMode) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sell_mode SET phase = ?, epoch = ?, changed_at_ms = `+nowMS+`
		WHERE id = 1 AND phase = ? AND epoch = ?`, to.Phase, to.Epoch, from.Phase, from.Epoch)
	if err != nil {
		return false, fmt.Errorf("sell mode move: %w", down(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sell mode move: %w", down(err))
	}
	return n == 1, nil
}

// Parts implements flashsale.ModeBoard.
func (s *Store) Parts(ctx context.Context) ([]flashsale.SellPart, time.Time, error) {
	var now int64
	if err := s.db.QueryRowContext(ctx, "SELECT "+nowMS).Scan(&now); err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", down(err))
	}
	rows, err := s.db.QueryContext(ctx, "SELECT instance, phase, epoch, selling, expires_at_ms FROM sell_parts")
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", down(err))
	}
	defer rows.Close()
	var parts []flashsale.SellPart
	for rows.Next() {
		var (
			p   flashsale.SellPart
			exp int64
		)
		if err := rows.Scan(&p.Instance, &p.Mode.Phase, &p.Mode.Epoch, &p.Selling, &exp); err != nil {
			return nil, time.Time{}, fmt.Errorf("sell parts: %w", down(err))
		}
		p.Expires = time.UnixMilli(exp)
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("sell parts: %w", down(err))
	}
	return parts, time.UnixMilli(now), nil
}
