package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// DeleteSale is flashsale.Store.DeleteSale: a test sale and everything of
// it go in one transaction, the sale's row locked first (the lock order of
// every transaction that changes a sale).
func (db Store) DeleteSale(ctx context.Context, id string) error {
	err := db.inTx(ctx, "delete_sale", func(tx Querier) error {
		return sqlrows.DeleteSale("?", func() (bool, bool, error) {
			var test bool
			err := tx.QueryRow(ctx, `SELECT test FROM sales WHERE id = ? FOR UPDATE`, id).Scan(&test)
			if errors.Is(err, sql.ErrNoRows) {
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
