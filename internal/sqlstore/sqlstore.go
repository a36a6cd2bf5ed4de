// Package sqlstore holds the steps the MySQL and PostgreSQL stores take
// alike, written once against a database/sql-shaped Querier. Each store
// adapts its driver (database/sql, pgx) to a Querier and says what its
// dialect does differently in a Dialect; the SQL that truly differs (the
// hot paths' batches, migrations, upserts) stays in the store's package.
//
// Shared statements are written with ? placeholders; a store whose driver
// numbers them ($1, $2) rewrites them with Numbered in its adapter.
package sqlstore

import (
	"context"
	"database/sql"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

// Querier is what a pool and a transaction offer alike, in database/sql's
// shape: a query that finds no row for QueryRow reports sql.ErrNoRows
// whatever the driver.
type Querier interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (affected int64, err error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) sqlrows.Scanner
}

// Rows are a query's rows; Close releases them.
type Rows interface {
	sqlrows.Rows
	Close()
}

// queryRows runs a query through q and reads all its rows with read (one
// of sqlrows' readers), releasing them after.
func queryRows[T any](ctx context.Context, q Querier, read func(rows sqlrows.Rows) (T, error), query string, args ...any) (T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		var none T
		return none, err
	}
	defer rows.Close()
	return read(rows)
}

// Store holds the flashsale.Store methods the SQL servers share, for a
// store to embed: each runs the same statements through the store's pool
// and transactions, written for its Dialect.
type Store struct {
	pool    Querier
	inTx    func(ctx context.Context, op string, fn func(tx Querier) error) error
	tx      func(ctx context.Context, fn func(tx Querier) error) error
	dialect Dialect
}

// New returns the shared methods over a store's driver: they run through
// its pool and its transactions, as Queriers.
func New[T any](d Driver[T]) Store {
	return Store{
		pool: d.Pool,
		tx: func(ctx context.Context, fn func(tx Querier) error) error {
			return d.Begin(ctx, func(tx T) error { return fn(d.Querier(tx)) })
		},
		inTx: func(ctx context.Context, op string, fn func(tx Querier) error) error {
			return d.InTx(ctx, op, func(tx T) error { return fn(d.Querier(tx)) })
		},
		dialect: d.Dialect,
	}
}

// Driver is a store's database as the shared code drives it, generic in the
// driver's own transaction type T (*sql.Tx for MySQL, pgx.Tx for
// PostgreSQL). The shared methods (Store) reach its transactions as
// Queriers; the frames of the writes whose statements differ between the
// servers (PlaceOrders, Transition, FailOrder, ExpireHolds) run the
// transaction, its retry, the reads they share and the outbox write, and
// hand the store's own statements the native T.
type Driver[T any] struct {
	// Pool runs statements outside a transaction.
	Pool Querier
	// Dialect is what the server does differently in the shared statements.
	Dialect Dialect
	// Begin runs fn in one READ COMMITTED transaction, committed if fn
	// returns nil and rolled back otherwise.
	Begin func(ctx context.Context, fn func(tx T) error) error
	// Querier adapts a transaction to a Querier, for the shared statements.
	Querier func(tx T) Querier
	// Victim reports whether err is that of a transaction the database
	// aborted as a deadlock victim (or a serialization failure), which
	// changed nothing; code, if not empty, goes into the retry's log line.
	Victim func(err error) (code string, ok bool)
	// Notices appends notices to the outbox in tx, in order: the last lock
	// of every write that takes it (see the store's writeNotices).
	Notices func(ctx context.Context, tx T, ns []flashsale.Notice) error
	// Logger gets the warning of every rerun.
	Logger *slog.Logger
}

// InTx runs fn in one of the store's READ COMMITTED transactions (Begin),
// and runs it again from the start while the database aborts it as a
// deadlock victim (see Retry); op names it in logs. fn must start from
// scratch each time: a victim was rolled back entirely.
func (d Driver[T]) InTx(ctx context.Context, op string, fn func(tx T) error) error {
	return Retry(ctx, d.Logger, op, d.Victim, func() error { return d.Begin(ctx, fn) })
}

// Dialect is what differs between the engines in the shared statements.
type Dialect struct {
	// Date reads a DATE column as YYYY-MM-DD.
	Date func(column string) string
	// DateArg is the placeholder of a YYYY-MM-DD argument compared with a
	// DATE column.
	DateArg string
	// Returning says UPDATE ... RETURNING reads back what it changed, in
	// the same round trip.
	Returning bool
	// IsDuplicate reports whether err is a unique key's refusal.
	IsDuplicate func(err error) bool
	// NowMS is the database's clock in unix milliseconds: leases are
	// judged by one clock, whatever the instances' say.
	NowMS string
	// ForShare is the clause that locks the rows a SELECT reads against
	// writers, not against other readers.
	ForShare string
	// UpsertPart ends the INSERT of an instance's sell_parts row so that
	// an existing row takes the new values.
	UpsertPart string
	// InsertNights writes a sale's nights, counters zero.
	InsertNights func(ctx context.Context, tx Querier, sale *flashsale.Sale) error
}

// Numbered rewrites each ? outside a quoted string as $1, $2, ... in turn,
// for PostgreSQL.
func Numbered(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c == '\'':
			quoted = !quoted
			b.WriteByte(c)
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// MaxRetriesDefault is how many times a transaction that lost a deadlock
// is run again before the error is returned.
const MaxRetriesDefault = 10

// Retry runs run, and runs it again while it fails with an error victim
// accepts (a deadlock victim's, which changed nothing, so a rerun is
// always safe), at most MaxRetriesDefault times in all. victim's code, if
// not empty, goes into the log line. Between runs it backs off a little,
// with jitter, so the survivors of the deadlock do not collide again in
// lockstep.
func Retry(ctx context.Context, logger *slog.Logger, op string, victim func(error) (code string, ok bool), run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if err == nil {
			return nil
		}
		code, ok := victim(err)
		if !ok || attempt >= MaxRetriesDefault {
			return err
		}
		attrs := []any{"op", op, "attempt", attempt}
		if code != "" {
			attrs = append(attrs, "code", code)
		}
		logger.Warn("deadlock, retrying transaction", attrs...)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * time.Duration(1+rand.IntN(5)) * time.Millisecond):
		}
	}
}

// SQL adapts a database/sql pool, connection or transaction to a Querier;
// wrap, if not nil, maps every error the driver returns (a store's
// outage mapping).
func SQL(q interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, wrap func(error) error) Querier {
	if wrap == nil {
		wrap = func(err error) error { return err }
	}
	return sqlQuerier{q, wrap}
}

type sqlQuerier struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
	wrap func(error) error
}

func (s sqlQuerier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, s.wrap(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.wrap(err)
	}
	return n, nil
}

func (s sqlQuerier) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	return sqlRows{rows, s.wrap}, nil
}

func (s sqlQuerier) QueryRow(ctx context.Context, query string, args ...any) sqlrows.Scanner {
	return sqlRow{s.q.QueryRowContext(ctx, query, args...), s.wrap}
}

type sqlRows struct {
	rows *sql.Rows
	wrap func(error) error
}

func (r sqlRows) Next() bool { return r.rows.Next() }
func (r sqlRows) Close()     { r.rows.Close() }

func (r sqlRows) Scan(dest ...any) error {
	if err := r.rows.Scan(dest...); err != nil {
		return r.wrap(err)
	}
	return nil
}

func (r sqlRows) Err() error {
	if err := r.rows.Err(); err != nil {
		return r.wrap(err)
	}
	return nil
}

type sqlRow struct {
	row  *sql.Row
	wrap func(error) error
}

func (r sqlRow) Scan(dest ...any) error {
	if err := r.row.Scan(dest...); err != nil {
		return r.wrap(err)
	}
	return nil
}
