package sqlrows

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// OutboxDB is what PruneOutbox needs of a store's database, whatever its
// driver: rows for a query, and an exec's rows-affected count.
type OutboxDB struct {
	// Numbered says the placeholders are $1, $2 (PostgreSQL), not ?.
	Numbered bool
	// Query runs a query; close is called once its rows are read.
	Query func(query string, args ...any) (rows Rows, close func(), err error)
	Exec  func(query string, args ...any) (affected int64, err error)
}

// PruneOutbox is every store's flashsale.Store.PruneOutbox.
//
// Neither table has an index on at_ms (one more page written by every
// order's commit), so each looks at its oldest limit rows by primary key,
// a bounded scan, and deletes the run of them older than before: rows are
// appended in time order, so that run is the table's old head. The run
// ends at the first row too young (or, for notices, past the slowest
// transport's cursor); a row written out of order only stops it early.
func PruneOutbox(db OutboxDB, before time.Time, limit int) (notices, deliveries int, err error) {
	at := unixMS(before)
	acked, hasCursor := int64(0), false // the slowest transport in use's cursor
	f := NewFilter(db.Numbered)
	err = db.each(`SELECT seq FROM notice_cursors WHERE lease_until_ms >= `+f.Arg(at)+` ORDER BY seq LIMIT 1`, f.Args, func(r Rows) (bool, error) {
		hasCursor = true
		return false, r.Scan(&acked)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("prune outbox: cursors: %w", err)
	}
	if notices, err = db.pruneHead("notices", "seq", at, limit, func(seq int64) bool { return !hasCursor || seq <= acked }); err != nil {
		return 0, 0, fmt.Errorf("prune outbox: notices: %w", err)
	}
	if deliveries, err = db.pruneHead("deliveries", "id", at, limit, func(int64) bool { return true }); err != nil {
		return notices, 0, fmt.Errorf("prune outbox: deliveries: %w", err)
	}
	return notices, deliveries, nil
}

// pruneHead deletes the run of table's oldest limit rows (by key) that
// were written before at and that may go.
func (db OutboxDB) pruneHead(table, key string, at int64, limit int, may func(int64) bool) (int, error) {
	last, found := int64(0), false
	f := NewFilter(db.Numbered)
	err := db.each(`SELECT `+key+`, at_ms FROM `+table+` ORDER BY `+key+` LIMIT `+f.Arg(limit), f.Args, func(r Rows) (bool, error) {
		var k, ms int64
		if err := r.Scan(&k, &ms); err != nil {
			return false, err
		}
		if ms >= at || !may(k) {
			return false, nil
		}
		last, found = k, true
		return true, nil
	})
	if err != nil || !found {
		return 0, err
	}
	f = NewFilter(db.Numbered)
	f.Add(key+` <= ?`, last)
	f.Add(`at_ms < ?`, at)
	n, err := db.Exec(`DELETE FROM `+table+` `+f.Where(), f.Args...)
	return int(n), err
}

// each runs query and hands each row to f until it returns false.
func (db OutboxDB) each(query string, args []any, f func(Rows) (bool, error)) error {
	rows, done, err := db.Query(query, args...)
	if err != nil {
		return err
	}
	defer done()
	for rows.Next() {
		if more, err := f(rows); err != nil || !more {
			return err
		}
	}
	return rows.Err()
}

// SQLDB is an OutboxDB over database/sql (MySQL, SQLite).
func SQLDB(ctx context.Context, db *sql.DB) OutboxDB {
	return OutboxDB{
		Query: func(query string, args ...any) (Rows, func(), error) {
			rows, err := db.QueryContext(ctx, query, args...)
			if err != nil {
				return nil, nil, err
			}
			return rows, func() { rows.Close() }, nil
		},
		Exec: func(query string, args ...any) (int64, error) {
			res, err := db.ExecContext(ctx, query, args...)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		},
	}
}
