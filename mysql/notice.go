package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The outbox of order events (see flashsale.Store and sqlrows.PlaceNotices).
//
// Seq follows commit order. An AUTO_INCREMENT value is handed out when a
// row is inserted, not when its transaction commits: without more, a
// transaction could take seq 10, another seq 11 and commit first, a
// dispatcher deliver 11 and move its cursor past 10, and notice 10 commit
// behind it, never to be delivered. So every transaction that writes
// notices first locks the one row of notice_lock and holds it until it
// commits: whoever takes the lock next sees every notice before its own
// committed, and a notice that commits later never has a lower seq than
// one already visible. InnoDB releases the row lock only once the commit
// is visible to new reads.
//
// Lock order: notice_lock is the last lock of every transaction that takes
// it (PlaceOrders, Transition, ExpireHolds and FailOrder, after their
// orders, users and nights), and nothing is locked after it but the new
// notice rows, so it waits for nothing that waits for it. It does make the
// ends of those transactions take turns, from the notice insert to the
// commit; on one sale they already take turns on its nights.

// writeNotices appends ns to the outbox in tx, in order (a multi-row
// INSERT assigns AUTO_INCREMENT values in row order). A notice whose ID is
// already there (which correct code never makes: an order reaches each
// status once, and a sell-out names the order that took the last room) is
// dropped, not a failure of the change it belongs to: the receiver would
// drop it as a duplicate anyway. The drop is logged.
func (s *Store) writeNotices(ctx context.Context, tx *sql.Tx, ns []flashsale.Notice) error {
	if len(ns) == 0 {
		return nil
	}
	var lock int
	if err := tx.QueryRowContext(ctx, "SELECT id FROM notice_lock WHERE id = 1 FOR UPDATE").Scan(&lock); err != nil {
		return fmt.Errorf("notices: lock: %w", err)
	}
	for chunk := range slices.Chunk(ns, maxNoticesPerStatement) {
		var q strings.Builder
		q.WriteString("INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload) VALUES (?, ?, ?, ?, ?, ?)")
		args := make([]any, 0, 6*len(chunk))
		for i, n := range chunk {
			if i > 0 {
				q.WriteString(", (?, ?, ?, ?, ?, ?)")
			}
			args = append(args, n.ID, string(n.Type), n.SaleID, n.OrderID, ms(n.At), string(n.Payload))
		}
		// id = id changes nothing, so a row that met its ID counts 0.
		q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
		res, err := tx.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return fmt.Errorf("notices: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("notices: %w", err)
		} else if n != int64(len(chunk)) {
			s.logger.Warn("notice ids already in the outbox, dropped", "dropped", int64(len(chunk))-n, "first", chunk[0].ID)
		}
	}
	return nil
}

// maxNoticesPerStatement bounds a notice INSERT's rows, keeping its
// statement well under max_allowed_packet.
const maxNoticesPerStatement = 256

// readStocks reads the nights of sales for the outbox, each sale's with
// its currency. With lock it locks them, in primary key order (the range
// scan's), before the transaction takes any: nothing else moves them until
// it commits, so what it read and its own takes tell whether it took the
// last room. Without lock it only wants the dates and start times, for
// failed orders.
func readStocks(ctx context.Context, q querier, sales []string, currency func(sale string) string, lock bool) (map[string]*sqlrows.Stock, error) {
	stocks := make(map[string]*sqlrows.Stock, len(sales))
	if len(sales) == 0 {
		return stocks, nil
	}
	query := "SELECT sale_id, idx, DATE_FORMAT(date, '%Y-%m-%d'), start_time, stock - held - sold FROM nights WHERE sale_id IN " +
		placeholders(len(sales)) + " ORDER BY sale_id, idx"
	if lock {
		query += " FOR UPDATE"
	}
	args := make([]any, len(sales))
	for i, id := range sales {
		args[i] = id
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	nights := make(map[string][]sqlrows.Night, len(sales))
	for rows.Next() {
		var sale string
		var n sqlrows.Night
		if err := rows.Scan(&sale, &n.Idx, &n.Date, &n.Time, &n.Available); err != nil {
			return nil, err
		}
		nights[sale] = append(nights[sale], n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range sales {
		stocks[id] = sqlrows.NewStock(currency(id), nights[id])
	}
	return stocks, nil
}

// ClaimNotices leases transport's cursor to owner until until and returns
// up to limit notices after it; see flashsale.Store and
// sqlrows.ClaimNotices. The lease is one conditional upsert: it inserts the
// cursor (before the first notice) or takes it when it is free, expired
// (at this instance's clock, the clock until comes from) or owner's
// already. Of two instances claiming a new transport, one inserts and the
// other's upsert waits for it, then finds the lease taken. The UPDATE part
// sets owner first and then the lease from the owner it just set, as
// MySQL assigns left to right.
func (s *Store) ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) ([]flashsale.Notice, bool, error) {
	ns, held, err := sqlrows.ClaimNotices(transport, owner, limit, sqlrows.Lease{
		Take: func() (cursor int64, held bool, err error) {
			err = s.driver.InTx(ctx, "claim_notices", func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO notice_cursors (transport, seq, owner, lease_until_ms)
					VALUES (?, 0, ?, ?) ON DUPLICATE KEY UPDATE
					owner = IF(owner = VALUES(owner) OR lease_until_ms <= ?, VALUES(owner), owner),
					lease_until_ms = IF(owner = VALUES(owner), VALUES(lease_until_ms), lease_until_ms)`,
					transport, owner, ms(until), time.Now().UnixMilli()); err != nil {
					return err
				}
				// The upsert locked the row: this reads what it left.
				var holder string
				err := tx.QueryRowContext(ctx, "SELECT seq, owner FROM notice_cursors WHERE transport = ?",
					transport).Scan(&cursor, &holder)
				held = holder == owner
				return err
			})
			return cursor, held, err
		},
		Read: func(cursor int64, limit int) ([]flashsale.Notice, error) {
			return sqlrows.Collect(sqlrows.Notices)(s.db.QueryContext(ctx, `SELECT `+sqlrows.NoticeColumns+` FROM notices
				WHERE seq > ? ORDER BY seq LIMIT ?`, cursor, limit))
		},
	})
	if err != nil {
		return nil, false, fmt.Errorf("claim notices: transport=%s: %w", transport, down(err))
	}
	return ns, held, nil
}

// AckNotices moves transport's cursor to seq, never back, if owner holds
// it; see flashsale.Store. The owner holds it until another claims it, so
// an ack that comes just after the lease ran out, before anyone took over,
// still counts (it can only move the cursor past what owner delivered).
func (s *Store) AckNotices(ctx context.Context, transport, owner string, seq int64) error {
	err := sqlrows.AckNotices(transport, owner, func() (bool, error) {
		moved, err := affected(s.db.ExecContext(ctx, `UPDATE notice_cursors SET seq = GREATEST(seq, ?)
			WHERE transport = ? AND owner = ?`, seq, transport, owner))
		if err != nil || moved {
			return moved, err
		}
		// clientFoundRows is off: an ack that left the cursor where it
		// was counts 0 as well as one that found another owner.
		return exists(ctx, s.db, "SELECT COUNT(*) FROM notice_cursors WHERE transport = ? AND owner = ?", transport, owner)
	})
	if err != nil {
		return fmt.Errorf("ack notices: transport=%s seq=%d: %w", transport, seq, down(err))
	}
	return nil
}

// NoticeCursor returns transport's cursor (0 before its first claim) and
// the outbox's last seq (0 when empty).
func (s *Store) NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT
		COALESCE((SELECT seq FROM notice_cursors WHERE transport = ?), 0),
		COALESCE((SELECT MAX(seq) FROM notices), 0)`, transport).Scan(&cursor, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("notice cursor: transport=%s: %w", transport, down(err))
	}
	return cursor, last, nil
}

// RecordDeliveries appends attempts to the delivery log in one INSERT.
func (s *Store) RecordDeliveries(ctx context.Context, ds []flashsale.Delivery) error {
	q, args, err := sqlrows.InsertDeliveries(ds, false)
	if err == nil && q != "" {
		_, err = s.db.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return fmt.Errorf("record deliveries: %w", down(err))
	}
	return nil
}

// Deliveries reads the delivery log newest first, a page of it at most;
// deliveries_transport, deliveries_notice and deliveries_failed (each
// ending in id) serve the filters.
func (s *Store) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	f := sqlrows.NewFilter(false)
	f.Deliveries(q)
	ds, err := sqlrows.Collect(sqlrows.Deliveries)(s.db.QueryContext(ctx, `SELECT `+sqlrows.DeliveryColumns+` FROM deliveries `+
		f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...))
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", down(err))
	}
	return ds, nil
}

// PruneOutbox deletes old, delivered notices and old delivery attempts;
// see flashsale.Store.
func (s *Store) PruneOutbox(ctx context.Context, before time.Time, limit int) (int, int, error) {
	return sqlrows.PruneOutbox(sqlrows.SQLDB(ctx, s.db), before, limit)
}
