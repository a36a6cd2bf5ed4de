package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// DeleteSale removes a test sale and everything of it in one transaction.
func (s *Store) DeleteSale(ctx context.Context, id string) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete sale: %w", err)
	}
	defer tx.Rollback()
	err = sqlrows.DeleteSale("?", func() (bool, bool, error) {
		var test bool
		err := tx.QueryRowContext(ctx, `SELECT test FROM sales WHERE id = ?`, id).Scan(&test)
		if errors.Is(err, sql.ErrNoRows) {
			return false, false, nil
		}
		return err == nil, test, err
	}, func(q string) error {
		_, err := tx.ExecContext(ctx, q, id)
		return err
	})
	if err == nil {
		err = tx.Commit()
	}
	if err != nil && !errors.Is(err, flashsale.ErrNotFound) && !errors.Is(err, flashsale.ErrNotTestSale) {
		return fmt.Errorf("delete sale: sale=%s: %w", id, err)
	}
	return err
}
