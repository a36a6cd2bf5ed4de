package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// The outbox of order events (see flashsale.Store and sqlrows.PlaceNotices).
// Every write runs on the single writer, which commits in the order it
// hands out seqs: a notice that commits later never has a lower seq than
// one a dispatcher already read, with no lock beyond the writer's own.

// writeNotices appends ns to the outbox in tx, in order. A notice whose ID
// is already there (which correct code never makes: an order reaches each
// status once, and a sell-out names the order that took the last room) is
// dropped, not a failure of the change it belongs to: the receiver would
// drop it as a duplicate anyway. The drop is logged.
//
// st, when set, holds the writer's prepared statements: a lone notice (a
// batch of one order, the usual case below a few hundred purchases a
// second; a payment) then costs no parse.
func (s *Store) writeNotices(ctx context.Context, tx *sql.Tx, st *statements, ns []flashsale.Notice) error {
	for chunk := range slices.Chunk(ns, maxRowsPerStatement) {
		args := make([]any, 0, 6*len(chunk))
		for _, n := range chunk {
			args = append(args, n.ID, string(n.Type), n.SaleID, n.OrderID, ms(n.At), string(n.Payload))
		}
		var (
			res sql.Result
			err error
		)
		if len(chunk) == 1 {
			res, err = txExec(ctx, tx, st, insertNoticeSQL, args...)
		} else {
			res, err = tx.ExecContext(ctx, insertNoticesSQL(len(chunk)), args...)
		}
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

// insertNoticeSQL is insertNoticesSQL(1), the usual case.
var insertNoticeSQL = insertNoticesSQL(1)

// insertNoticesSQL appends rows notices, ignoring an ID already there.
func insertNoticesSQL(rows int) string {
	return `INSERT INTO notices (id, type, sale_id, order_id, at_ms, payload)
		VALUES ` + placeholders(rows, 6) + ` ON CONFLICT (id) DO NOTHING`
}

const readStockSQL = `SELECT idx, date, start_time, stock - held - sold FROM nights WHERE sale_id = ? ORDER BY idx`

// readStock reads a sale's nights for the outbox (each one's date and
// start time, which name a placed order's check-in and slot), before the
// transaction takes any (the writer holds the database, so nothing else
// moves them).
func readStock(ctx context.Context, q queryer, saleID, currency string) (*sqlrows.Stock, error) {
	nights, err := scanNights(q.QueryContext(ctx, readStockSQL, saleID))
	if err != nil {
		return nil, err
	}
	return sqlrows.NewStock(currency, nights), nil
}

// scanNights reads readStockSQL's rows (and the error of the query).
func scanNights(rows *sql.Rows, err error) ([]sqlrows.Night, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var nights []sqlrows.Night
	for rows.Next() {
		var n sqlrows.Night
		if err := rows.Scan(&n.Idx, &n.Date, &n.Time, &n.Available); err != nil {
			return nil, err
		}
		nights = append(nights, n)
	}
	return nights, rows.Err()
}

// ClaimNotices leases transport's cursor to owner until until and returns
// up to limit notices after it; see flashsale.Store and
// sqlrows.ClaimNotices. The lease is one conditional upsert: it inserts the
// cursor (before the first notice) or takes it when it is free, expired
// (at the store's clock, the clock until comes from) or owner's already,
// and returns no row otherwise.
func (s *Store) ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) ([]flashsale.Notice, bool, error) {
	ns, held, err := sqlrows.ClaimNotices(transport, owner, limit, sqlrows.Lease{
		Take: func() (cursor int64, held bool, err error) {
			err = s.write.QueryRowContext(ctx, `INSERT INTO notice_cursors (transport, seq, owner, lease_until_ms)
				VALUES (?, 0, ?, ?)
				ON CONFLICT (transport) DO UPDATE SET owner = excluded.owner, lease_until_ms = excluded.lease_until_ms
				WHERE notice_cursors.owner = excluded.owner OR notice_cursors.lease_until_ms <= ?
				RETURNING seq`, transport, owner, ms(until), ms(time.Now())).Scan(&cursor)
			return noRow(cursor, err)
		},
		Read: func(cursor int64, limit int) ([]flashsale.Notice, error) {
			return sqlrows.Collect(sqlrows.Notices)(s.read.QueryContext(ctx, `SELECT `+sqlrows.NoticeColumns+` FROM notices
				WHERE seq > ? ORDER BY seq LIMIT ?`, cursor, limit))
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
		return affected(s.write.ExecContext(ctx, `UPDATE notice_cursors SET seq = max(seq, ?)
			WHERE transport = ? AND owner = ?`, seq, transport, owner))
	})
	if err != nil {
		return fmt.Errorf("ack notices: transport=%s seq=%d: %w", transport, seq, err)
	}
	return nil
}

// NoticeCursor returns transport's cursor (0 before its first claim) and
// the outbox's last seq (0 when empty).
func (s *Store) NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error) {
	err = s.read.QueryRowContext(ctx, `SELECT
		coalesce((SELECT seq FROM notice_cursors WHERE transport = ?), 0),
		coalesce((SELECT max(seq) FROM notices), 0)`, transport).Scan(&cursor, &last)
	if err != nil {
		return 0, 0, fmt.Errorf("notice cursor: transport=%s: %w", transport, err)
	}
	return cursor, last, nil
}

// RecordDeliveries appends attempts to the delivery log in one INSERT.
func (s *Store) RecordDeliveries(ctx context.Context, ds []flashsale.Delivery) error {
	q, args, err := sqlrows.InsertDeliveries(ds, false)
	if err == nil && q != "" {
		_, err = s.write.ExecContext(ctx, q, args...)
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
	f := sqlrows.NewFilter(false)
	f.Deliveries(q)
	ds, err := sqlrows.Collect(sqlrows.Deliveries)(s.read.QueryContext(ctx, `SELECT `+sqlrows.DeliveryColumns+` FROM deliveries `+
		f.Where()+` ORDER BY id DESC LIMIT `+f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...))
	if err != nil {
		return nil, fmt.Errorf("deliveries: %w", err)
	}
	return ds, nil
}

// PruneOutbox deletes old, delivered notices and old delivery attempts;
// see flashsale.Store. It runs on the writer's connection.
func (s *Store) PruneOutbox(ctx context.Context, before time.Time, limit int) (int, int, error) {
	return sqlrows.PruneOutbox(sqlrows.SQLDB(ctx, s.write), before, limit)
}
