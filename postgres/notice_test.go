package postgres_test

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/storetest"
)

// TestNoticeOrder holds the outbox's advisory lock in another transaction
// with a notice inserted: a store transaction must wait for it (see
// storetest.RunNoticeOrder).
func TestNoticeOrder(t *testing.T) {
	s := MustOpenStore(t)
	ctx := t.Context()
	storetest.RunNoticeOrder(t, s.Roles(), func() (func() error, error) {
		other, err := s.Pool().Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { other.Rollback(context.Background()) })
		if _, err := other.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(postgres.NoticeLockKey)); err != nil {
			return nil, err
		}
		if _, err := other.Exec(ctx, `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
			VALUES ('x.held', 'order.held', 'n', 'x', 0, '{}')`); err != nil {
			return nil, err
		}
		return func() error { return other.Commit(ctx) }, nil
	}, func() (bool, error) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND NOT granted`).Scan(&n)
		return n > 0, err
	})
}
