// Package sqlite implements flashsale.Store over a SQLite file, the
// database of the embedded shape. It uses modernc.org/sqlite (pure Go, no
// cgo) so the single binary stays self-contained.
//
// Writes go through one connection (a *sql.DB capped at one open
// connection, every transaction BEGIN IMMEDIATE): SQLite allows one writer
// at a time anyway, and serialising in Go means the group-commit writer
// never waits on a busy lock. Reads use a separate pool; in WAL mode they
// see the last commit and never block the writer.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// BusyTimeout is how long a connection waits for another process's lock
// (a migration, a backup) before failing.
const BusyTimeout = 10 * time.Second

//go:embed migrations/*.sql
var migrations embed.FS

// Roles is the store as the service takes it, with the waiting rooms'
// records. SQLite keeps no boards: its one instance has nobody to agree
// with.
func (s *Store) Roles() flashsale.Store {
	return flashsale.Store{SaleStore: s, OrderStore: s, Books: s, NoticeStore: s, Database: s, Queues: s}
}

// Store is the SQLite flashsale.Store.
type Store struct {
	write  *sql.DB // exactly one connection: the single writer
	read   *sql.DB // readers; WAL lets them run beside the writer
	logger *slog.Logger

	mu    sync.Mutex
	stmts *statements // prepared on the writer once the schema exists
	reads *stmtCache  // the readers' statements of fixed text
}

// stmtCache holds the read pool's statements of fixed text, prepared on
// first use. database/sql keeps a statement prepared on each connection
// that ran it, so a hot read (a guest's order, the reaper's probe every
// 100 ms) is parsed once per connection instead of on every call: SQLite's
// parser was more than half of reading an order by its ID (BenchmarkOrder:
// 36 -> 14 µs). The writer cannot prepare this way: its one connection is
// held by the transaction that wants the statement (see statements.fixed).
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex // held while preparing, so a text is prepared once
	m  sync.Map   // SQL text -> *sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := c.m.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m.Store(query, st)
	return st, nil
}

func (c *stmtCache) close() error {
	var errs []error
	c.m.Range(func(_, st any) bool {
		errs = append(errs, st.(*sql.Stmt).Close())
		return true
	})
	return errors.Join(errs...)
}

// queryRow runs query, of fixed text, on a reader.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) sqlrows.Scanner {
	st, err := s.reads.get(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// txQueryRow runs query in tx on the writer, prepared if it is one of
// writerSQL (st, from prepared, may be nil: unprepared).
func txQueryRow(ctx context.Context, tx *sql.Tx, st *statements, query string, args ...any) *sql.Row {
	if p := st.fixedStmt(query); p != nil {
		return tx.StmtContext(ctx, p).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txExec executes query in tx on the writer, as txQueryRow.
func txExec(ctx context.Context, tx *sql.Tx, st *statements, query string, args ...any) (sql.Result, error) {
	if p := st.fixedStmt(query); p != nil {
		return tx.StmtContext(ctx, p).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// errRow is a row whose query could not be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// statements are the writer's prepared statements: writerSQL's, and
// PlaceOrders' set-based ones for each size of chunk. They are prepared
// before a transaction takes the writer's one connection (a statement
// prepared inside one ends with it).
type statements struct {
	fixed [len(writerSQL)]*sql.Stmt // writerSQL's, in its order
	// The set-based statements, by size: [k] carries 1<<k rows (see chunks).
	readOrders, insertOrders, addUserRooms [sizes]*sql.Stmt
}

// fixedStmt is query's prepared statement if query is one of writerSQL,
// else nil (as it is for a nil st).
func (st *statements) fixedStmt(query string) *sql.Stmt {
	if st == nil {
		return nil
	}
	for i, q := range writerSQL {
		if q == query {
			return st.fixed[i]
		}
	}
	return nil
}

// sources pairs each of st's statements with its SQL.
func (st *statements) sources() []source {
	var srcs []source
	for i, q := range writerSQL {
		srcs = append(srcs, source{&st.fixed[i], q})
	}
	for k := range sizes {
		srcs = append(srcs,
			source{&st.readOrders[k], fmt.Sprintf(readOrdersSQL, placeholders(1<<k, readOrdersWidth))},
			source{&st.insertOrders[k], fmt.Sprintf(insertOrdersSQL, placeholders(1<<k, insertOrderWidth))},
			source{&st.addUserRooms[k], fmt.Sprintf(addUserRoomsSQL, placeholders(1<<k, addUserWidth))})
	}
	return srcs
}

type source struct {
	stmt **sql.Stmt
	sql  string
}

// prepared returns the writer's statements, preparing them on first use
// (after Migrate: they need the tables).
func (s *Store) prepared(ctx context.Context) (*statements, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts != nil {
		return s.stmts, nil
	}
	var st statements
	for _, src := range st.sources() {
		stmt, err := s.write.PrepareContext(ctx, src.sql)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*src.stmt = stmt
	}
	s.stmts = &st
	return s.stmts, nil
}

func (st *statements) close() error {
	var errs []error
	for _, src := range st.sources() {
		if *src.stmt != nil {
			errs = append(errs, (*src.stmt).Close())
		}
	}
	return errors.Join(errs...)
}

// Open opens (creating if needed) the database file at path; a sqlite://
// prefix is accepted so the same URL style works for every engine. Call
// Migrate before use.
//
// Every connection runs in WAL mode with synchronous=FULL: a committed
// PlaceOrders batch is on disk before the caller answers 202.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	path = strings.TrimPrefix(path, "sqlite://")
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open sqlite: invalid path %q", path)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pragmas := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		for _, p := range extra {
			k, v, _ := strings.Cut(p, "=")
			q.Add(k, v)
		}
		return path + "?" + q.Encode()
	}

	write, err := sql.Open("sqlite", pragmas("_pragma=journal_mode(WAL)", "_pragma=synchronous(FULL)", "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	// Opening the writer first switches the file to WAL before any reader
	// connects.
	if err := pingBusy(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite: %s: %w", path, err)
	}

	read, err := sql.Open("sqlite", pragmas("_pragma=query_only(1)"))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)
	if err := read.PingContext(ctx); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open sqlite: %s: %w", path, err)
	}
	return &Store{write: write, read: read, logger: logger, reads: &stmtCache{db: read}}, nil
}

// pingBusy opens db's first connection, waiting up to BusyTimeout while
// another process holds the file. The switch to WAL takes a lock SQLite
// does not wait for (busy_timeout does not cover it), so two handles
// opening a new file at once, a `flashsale migrate` beside a starting
// server, failed with SQLITE_BUSY (storetest.RunMigrate on SQLite).
func pingBusy(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for {
		err := db.PingContext(ctx)
		if !busy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// busy reports whether err is SQLite's "database is locked".
func busy(err error) bool {
	e, ok := errors.AsType[*msqlite.Error](err)
	return ok && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Close closes both pools.
func (s *Store) Close() error {
	s.mu.Lock()
	var err error
	if s.stmts != nil {
		err = s.stmts.close()
	}
	err = errors.Join(err, s.reads.close())
	s.mu.Unlock()
	return errors.Join(err, s.read.Close(), s.write.Close())
}

// Migrate applies the embedded migrations that are not yet recorded in
// schema_migrations, each in its own transaction, in file-name order. It is
// idempotent and safe to run from two processes at once (BEGIN IMMEDIATE
// serialises them; each re-checks inside its transaction).
func (s *Store) Migrate(ctx context.Context) error {
	if _, err := s.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version       TEXT    NOT NULL PRIMARY KEY,
		applied_at_ms INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := s.migrate(ctx, name); err != nil {
			return fmt.Errorf("migrate: %s: %w", name, err)
		}
	}
	return nil
}

func (s *Store) migrate(ctx context.Context, name string) error {
	version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
	body, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at_ms) VALUES (?, ?)`,
		version, time.Now().UnixMilli()); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.logger.Info("sqlite migration applied", "version", version)
	return nil
}

// constraint returns the extended SQLite result code of a constraint
// violation in err's chain, or 0.
func constraint(err error) int {
	if e, ok := errors.AsType[*msqlite.Error](err); ok && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return e.Code()
	}
	return 0
}

// ms converts a time to the unix milliseconds the schema stores.
func ms(t time.Time) int64 { return t.UnixMilli() }

// queryer is what both *sql.DB and *sql.Tx offer, so reads can run alone
// or inside a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Ping reports whether the database answers; /readyz uses it.
func (s *Store) Ping(ctx context.Context) error { return s.read.PingContext(ctx) }
