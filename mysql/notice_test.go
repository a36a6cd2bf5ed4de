package mysql_test

import (
	"testing"

	"github.com/flashsale/flashsale/storetest"
)

// TestNoticeOrder holds notice_lock in another transaction with a notice
// inserted: a store transaction must wait for it (see storetest.RunNoticeOrder).
func TestNoticeOrder(t *testing.T) {
	s := MustOpenStore(t)
	ctx := t.Context()
	storetest.RunNoticeOrder(t, s.Roles(), func() (func() error, error) {
		other, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { other.Rollback() })
		if _, err := other.ExecContext(ctx, "SELECT id FROM notice_lock WHERE id = 1 FOR UPDATE"); err != nil {
			return nil, err
		}
		if _, err := other.ExecContext(ctx, `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
			VALUES ('x.held', 'order.held', 'n', 'x', 0, '{}')`); err != nil {
			return nil, err
		}
		return other.Commit, nil
	}, func() (bool, error) {
		var n int
		err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'SELECT id FROM notice_lock%'`).Scan(&n)
		return n > 0, err
	})
}
