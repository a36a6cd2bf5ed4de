package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// DeleteSale removes a test sale and everything of it in one
// transaction, the sale's row locked first (the lock order of every
// transaction that changes a sale).
func (s *Store) DeleteSale(ctx context.Context, id string) error {
	err := s.inTx(ctx, "delete_sale", func(tx *sql.Tx) error {
		return sqlrows.DeleteSale("?", func() (bool, bool, error) {
			var test bool
			err := tx.QueryRowContext(ctx, `SELECT test FROM sales WHERE id = ? FOR UPDATE`, id).Scan(&test)
			if errors.Is(err, sql.ErrNoRows) {
				return false, false, nil
			}
			return err == nil, test, err
		}, func(q string) error {
			_, err := tx.ExecContext(ctx, q, id)
			return err
		})
	})
	if err != nil && !errors.Is(err, flashsale.ErrNotFound) && !errors.Is(err, flashsale.ErrNotTestSale) {
		return fmt.Errorf("delete sale: sale=%s: %w", id, down(err))
	}
	return err
}
