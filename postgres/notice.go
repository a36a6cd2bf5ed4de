package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The outbox of order events (see flashsale.Store and sqlrows.PlaceNotices).
//
// Seq follows commit order. An identity value is handed out when a row is
// inserted, not when its transaction commits: without more, a transaction
// could take seq 10, another seq 11 and commit first, a dispatcher deliver
// 11 and move its cursor past 10, and notice 10 commit behind it, never to
// be delivered. So every transaction that writes notices first takes the
// outbox's advisory lock (pg_advisory_xact_lock, released when it ends):
// whoever takes it next sees every notice before its own committed (a
// transaction is visible before it releases its locks), and a notice that
// commits later never has a lower seq than one already visible.
//
// Lock order: the advisory lock is the last lock of every transaction that
// takes it (PlaceOrders, Transition, ExpireHolds and FailOrder, after their
// orders, nights and users), and nothing is locked after it but the new
// notice rows, so it waits for nothing that waits for it. It does make the
// ends of those transactions take turns, from the notice insert to the
// commit; on one sale they already take turns on its nights.

// noticeLockKey names the outbox's advisory lock ("notice"); advisory
// locks are scoped to the database.
const noticeLockKey = 0x6e6f74696365

const sqlInsertNotices = `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
	SELECT id, type, sale_id, order_id, at_ms, payload
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[]) WITH ORDINALITY
		AS t(id, type, sale_id, order_id, at_ms, payload, n)
	ORDER BY n
	ON CONFLICT (id) DO NOTHING`

// writeNotices appends ns to the outbox in tx, in order: one round trip
// for the lock and one INSERT whose rows take their seqs in ns's order. A
// notice whose ID is already there (which correct code never makes: an
// order reaches each status once, and a sell-out names the order that took
// the last room) is dropped, not a failure of the change it belongs to:
// the receiver would drop it as a duplicate anyway. The drop is logged.
func (s *Store) writeNotices(ctx context.Context, tx pgx.Tx, ns []flashsale.Notice) error {
	if len(ns) == 0 {
		return nil
	}
	ids, types, sales, orders, payloads := make([]string, len(ns)), make([]string, len(ns)), make([]string, len(ns)),
		make([]string, len(ns)), make([]string, len(ns))
	ats := make([]int64, len(ns))
	for i, n := range ns {
		ids[i], types[i], sales[i], orders[i], ats[i], payloads[i] = n.ID, string(n.Type), n.SaleID, n.OrderID, ms(n.At), string(n.Payload)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock($1)", int64(noticeLockKey))
	b.Queue(sqlInsertNotices, ids, types, sales, orders, ats, payloads)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("notices: lock: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("notices: %w", err)
	}
	if n := tag.RowsAffected(); n != int64(len(ns)) {
		s.logger.Warn("notice ids already in the outbox, dropped", "dropped", int64(len(ns))-n, "first", ns[0].ID)
	}
	return br.Close()
}

// sqlLockStocks locks the nights of the given sales in primary key order
// and reads what the outbox needs of them: the date and start time that
// name a placed order's check-in and slot, and the rooms available.
const sqlLockStocks = `SELECT sale_id, idx, to_char(date, 'YYYY-MM-DD'), start_time, stock - held - sold FROM nights
	WHERE sale_id = ANY($1) ORDER BY sale_id, idx FOR UPDATE`

// scanStocks reads sqlLockStocks' rows into per-sale nights.
func scanStocks(rows pgx.Rows, err error) (map[string][]sqlrows.Night, error) {
	nights := map[string][]sqlrows.Night{}
	if err != nil {
		return nil, err
	}
	var (
		sale string
		n    sqlrows.Night
	)
	_, err = pgx.ForEachRow(rows, []any{&sale, &n.Idx, &n.Date, &n.Time, &n.Available}, func() error {
		nights[sale] = append(nights[sale], n)
		return nil
	})
	return nights, err
}

// ClaimNotices leases transport's cursor to owner until until and returns
// up to limit notices after it; see flashsale.Store and
// sqlrows.ClaimNotices. The lease is one conditional upsert: it inserts the
// cursor (before the first notice) or takes it when it is free, expired
// (at this instance's clock, the clock until comes from) or owner's
// already, and returns no row otherwise. Of two instances claiming a new
// transport, one inserts and the other's upsert waits for it, then finds
// the lease taken.
func (s *Store) ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) ([]flashsale.Notice, bool, error) {
	ns, held, err := sqlrows.ClaimNotices(transport, owner, limit, sqlrows.Lease{
		Take: func() (cursor int64, held bool, err error) {
			err = s.pool.QueryRow(ctx, `INSERT INTO notice_cursors (transport, seq, owner, lease_until_ms)
				VALUES ($1, 0, $2, $3)
				ON CONFLICT (transport) DO UPDATE SET owner = EXCLUDED.owner, lease_until_ms = EXCLUDED.lease_until_ms
				WHERE notice_cursors.owner = EXCLUDED.owner OR notice_cursors.lease_until_ms <= $4
				RETURNING seq`, transport, owner, ms(until), time.Now().UnixMilli()).Scan(&cursor)
			if errors.Is(err, pgx.ErrNoRows) {
				return 0, false, nil
			}
			return cursor, err == nil, err
		},
		Read: func(cursor int64, limit int) ([]flashsale.Notice, error) {
			rows, err := s.pool.Query(ctx, `SELECT `+sqlrows.NoticeColumns+` FROM notices
				WHERE seq > $1 ORDER BY seq LIMIT $2`, cursor, limit)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return sqlrows.Notices(rows)
		},
	})
	if err != nil {
		return nil, false, fmt.Errorf("claim notices: transport=%s: %w", transport, err)
	}
	return ns, held, nil
}

// AckNotices moves transport's cursor to seq, never back, if owner holds
// it; see flashsale.Store. The owner holds it until another claims it, so
// an ack that comes just after the lease ran out, before anyone took over,
// still counts (it can only move the cursor past what owner delivered).
func (s *Store) AckNotices(ctx context.Context, transport, owner string, seq int64) error {
	err := sqlrows.AckNotices(transport, owner, func() (bool, error) {
		tag, err := s.pool.Exec(ctx, `UPDATE notice_cursors SET seq = GREATEST(seq, $1)
			WHERE transport = $2 AND owner = $3`, seq, transport, owner)
		return tag.RowsAffected() > 0, err
	})
	if err != nil {
		return fmt.Errorf("ack notices: transport=%s seq=%d: %w", transport, seq, err)
	}
	return nil
}

// NoticeCursor returns transport's cursor (0 before its first claim) and
// the outbox's last seq (0 when empty).
func (s *Store) NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT
		COALESCE((SELECT seq FROM notice_cursors WHERE transport = $1), 0),
		COALESCE((SELECT max(seq) FROM notices), 0)`, transport).Scan(&cursor, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("notice cursor: transport=%s: %w", transport, err)
	}
	return cursor, last, nil
}

// RecordDeliveries appends attempts to the delivery log in one INSERT.
func (s *Store) RecordDeliveries(ctx context.Context, ds []flashsale.Delivery) error {
	q, args, err := sqlrows.InsertDeliveries(ds, true)
	if err == nil && q != "" {
		_, err = s.pool.Exec(ctx, q, args...)
	}
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	return nil
}

// Deliveries reads the delivery log newest first, a page of it at most;
// deliveries_transport, deliveries_notice and deliveries_failed serve the
// filters.
func (s *Store) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	f := sqlrows.NewFilter(true)
	f.Deliveries(q)
	rows, err := s.pool.Query(ctx, `SELECT `+sqlrows.DeliveryColumns+` FROM deliveries `+f.Where()+
		` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	defer rows.Close()
	ds, err := sqlrows.Deliveries(rows)
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return ds, nil
}

// PruneOutbox deletes old, delivered notices and old delivery attempts;
// see flashsale.Store.
func (s *Store) PruneOutbox(ctx context.Context, before time.Time, limit int) (int, int, error) {
	return sqlrows.PruneOutbox(sqlrows.OutboxDB{
		Numbered: true,
		Query: func(query string, args ...any) (sqlrows.Rows, func(), error) {
			rows, err := s.pool.Query(ctx, query, args...)
			if err != nil {
				return nil, nil, err
			}
			return rows, rows.Close, nil
		},
		Exec: func(query string, args ...any) (int64, error) {
			tag, err := s.pool.Exec(ctx, query, args...)
			return tag.RowsAffected(), err
		},
	}, before, limit)
}
