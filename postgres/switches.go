package postgres

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
)

var _ flashsale.ForceBoard = (*Store)(nil)

// SetBreakerForce implements flashsale.ForceBoard.
func (s *Store) SetBreakerForce(ctx context.Context, f flashsale.BreakerForce) error {
	if _, err := s.pool.Exec(ctx, `UPDATE switches SET breaker_force = $1, changed_at_ms = `+nowMS+` WHERE id = 1`,
		string(f)); err != nil {
		return fmt.Errorf("set breaker force: %w", err)
	}
	return nil
}

// BreakerForce implements flashsale.ForceBoard.
func (s *Store) BreakerForce(ctx context.Context) (flashsale.BreakerForce, error) {
	var f string
	if err := s.pool.QueryRow(ctx, "SELECT breaker_force FROM switches WHERE id = 1").Scan(&f); err != nil {
		return "", fmt.Errorf("breaker force: %w", err)
	}
	return flashsale.BreakerForce(f), nil
}
