package mysql_test

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/mysql"
)

// holdNoticeLock locks notice_lock's row in another transaction, as the
// store's writers do, and inserts a notice (see storetest.RunNoticeOrder).
func holdNoticeLock(tb testing.TB, s *mysql.Store) (commit func() error, err error) {
	ctx := tb.Context()
	other, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { other.Rollback() })
	if _, err := other.ExecContext(ctx, "SELECT id FROM notice_lock WHERE id = 1 FOR UPDATE"); err != nil {
		return nil, err
	}
	if _, err := other.ExecContext(ctx, `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
		VALUES ('x.held', 'order.held', 'n', 'x', 0, '{}')`); err != nil {
		return nil, err
	}
	return other.Commit, nil
}

// noticeLockWaited reports whether a statement of s's database waits on
// notice_lock: the one the store's writers start with.
func noticeLockWaited(ctx context.Context, s *mysql.Store) (bool, error) {
	var n int
	err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = DATABASE() AND INFO LIKE 'SELECT id FROM notice_lock%'`).Scan(&n)
	return n > 0, err
}
