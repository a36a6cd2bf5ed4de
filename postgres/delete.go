package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// DeleteSale removes a test sale and everything of it in one
// transaction, the sale's row locked first.
func (s *Store) DeleteSale(ctx context.Context, id string) error {
	err := s.inTx(ctx, "delete_sale", func(tx pgx.Tx) error {
		return sqlrows.DeleteSale("$1", func() (bool, bool, error) {
			var test bool
			err := tx.QueryRow(ctx, `SELECT test FROM sales WHERE id = $1 FOR UPDATE`, id).Scan(&test)
			if errors.Is(err, pgx.ErrNoRows) {
				return false, false, nil
			}
			return err == nil, test, err
		}, func(q string) error {
			_, err := tx.Exec(ctx, q, id)
			return err
		})
	})
	if err != nil && !errors.Is(err, flashsale.ErrNotFound) && !errors.Is(err, flashsale.ErrNotTestSale) {
		return fmt.Errorf("delete sale: sale=%s: %w", id, err)
	}
	return err
}
