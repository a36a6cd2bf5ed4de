package postgres_test

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/postgres"
)

// holdNoticeLock takes the outbox's advisory lock in another transaction,
// as the store's writers do, and inserts a notice (see
// storetest.RunNoticeOrder).
func holdNoticeLock(tb testing.TB, s *postgres.Store) (commit func() error, err error) {
	ctx := tb.Context()
	other, err := s.Pool().Begin(ctx)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { other.Rollback(context.Background()) })
	if _, err := other.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(postgres.NoticeLockKey)); err != nil {
		return nil, err
	}
	if _, err := other.Exec(ctx, `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
		VALUES ('x.held', 'order.held', 'n', 'x', 0, '{}')`); err != nil {
		return nil, err
	}
	return func() error { return other.Commit(ctx) }, nil
}

// noticeLockWaited reports whether a transaction of s's database waits
// for an advisory lock: the outbox's is the only one its writers take.
func noticeLockWaited(ctx context.Context, s *postgres.Store) (bool, error) {
	var n int
	err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND NOT granted`).Scan(&n)
	return n > 0, err
}
