// Package postgres is the flashsale.Store for PostgreSQL (15 and later), the
// database of the distributed shape. Every counter change is a conditional
// UPDATE whose rows-affected count is checked, inside the same transaction
// as the order row it belongs to, so the database refuses an oversell even
// if the stock engine in front of it were wrong. It uses pgx natively
// (pgxpool, pipelined batches) rather than database/sql, so a batch of
// reservations costs a few round trips instead of several per reservation.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// PostgreSQL error codes (SQLSTATE) the store branches on.
const (
	codeUniqueViolation      = "23505"
	codeDeadlockDetected     = "40P01"
	codeSerializationFailure = "40001"
)

// Tunables with their defaults.
const (
	// MaxRetriesDefault is how many times a transaction that lost a deadlock
	// is run again before the error is returned.
	MaxRetriesDefault = sqlstore.MaxRetriesDefault
	// migrateLockKey names the advisory lock that serialises Migrate across
	// instances. Advisory locks are scoped to the database.
	migrateLockKey = 0x666c617368 // "flash"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a flashsale.Store backed by PostgreSQL.
type Store struct {
	// shared is what the SQL servers do alike: ListSales, Sale, Sales,
	// NightStocks, CreateSale, UpdateSale, AdjustStock, SaleChanges,
	// DeleteSale, Order, OrderByKey, SaleOrders and the ModeBoard's, run
	// through this store's pool and transactions.
	shared
	// driver runs this store's transactions, for the frames of the writes
	// whose statements are PostgreSQL's own (PlaceOrders, Transition,
	// FailOrder, ExpireHolds).
	driver sqlstore.Driver[pgx.Tx]
	pool   *pgxpool.Pool
	logger *slog.Logger
}

type shared = sqlstore.Store

// dialect is what PostgreSQL does differently in sqlstore's statements.
var dialect = sqlstore.Dialect{
	Date:      func(column string) string { return "to_char(" + column + ", 'YYYY-MM-DD')" },
	DateArg:   "?::date",
	Returning: true,
	NowMS:     nowMS,
	ForShare:  "FOR SHARE",
	UpsertPart: `ON CONFLICT (instance) DO UPDATE SET phase = excluded.phase, epoch = excluded.epoch,
		selling = excluded.selling, expires_at_ms = excluded.expires_at_ms`,
	IsDuplicate:  isDuplicate,
	InsertNights: insertNights,
}

// Roles is the store as the service takes it, with the boards where
// the deployment's instances agree and the waiting rooms' records.
func (s *Store) Roles() flashsale.Store {
	return flashsale.Store{SaleStore: s, OrderStore: s, Books: s, NoticeStore: s, Database: s, Modes: s, Forces: s, Queues: s}
}

// MaxConnsDefault caps one instance's connections to the database.
const MaxConnsDefault = 16

// Open connects to the database named by a URL of the form
// postgres://user:pass@host:port/db?params (postgresql:// works too; params
// are pgx's, such as pool_max_conns). It pings the server, so a wrong URL
// fails here rather than on the first purchase.
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse url: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("open postgres: scheme %q is not postgres or postgresql", u.Scheme)
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		// pgxpool's default is max(4, NumCPU): too few for the consumer,
		// the reaper and request reads at once. A pool_max_conns in the URL wins.
		cfg.MaxConns = MaxConnsDefault
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: ping %s: %w", u.Host, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{pool: pool, logger: logger}
	s.driver = sqlstore.Driver[pgx.Tx]{
		Pool:    pgq{pool},
		Dialect: dialect,
		Begin:   s.tx,
		Querier: func(tx pgx.Tx) sqlstore.Querier { return pgq{tx} },
		Victim:  victim,
		Notices: s.writeNotices,
		Logger:  logger,
	}
	s.shared = sqlstore.New(s.driver)
	return s, nil
}

// Close closes the connection pool, waiting for connections in use.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool returns the underlying pool, for tests and the audit command.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Migrate applies the embedded migrations that are not yet recorded in
// schema_migrations, all in one transaction (PostgreSQL DDL is
// transactional, so a failed migration leaves nothing behind). Many
// instances may start at once: the transaction first takes an advisory lock,
// so the others wait for it to commit and then find nothing left to do.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockKey)); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version       INTEGER      NOT NULL PRIMARY KEY,
		name          VARCHAR(200) NOT NULL,
		applied_at_ms BIGINT       NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	slices.Sort(files)
	var applied []string
	for _, file := range files {
		name := strings.TrimPrefix(file, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a version number: %w", name, err)
		}
		if slices.Contains(versions, int32(version)) {
			continue
		}
		body, err := migrations.ReadFile(file)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		// Without arguments pgx uses the simple protocol, which runs a file
		// of several statements at once.
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fmt.Errorf("migrate: %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)",
			version, name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migrate: %s: record: %w", name, err)
		}
		applied = append(applied, name)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	for _, name := range applied {
		s.logger.Info("migration applied", "engine", "postgres", "migration", name)
	}
	return nil
}

// tx runs fn in a READ COMMITTED transaction (the server's default): the
// Begin of s.driver, whose InTx runs it again from the start when
// PostgreSQL aborts it as a deadlock victim (or, should a caller raise the
// isolation level, a serialization failure: see victim). The lock order
// that keeps deadlocks rare is described at PlaceOrders; an aborted
// transaction changed nothing, so a rerun is always safe.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// victim reports whether err aborted a transaction that a rerun may
// retry, with its SQLSTATE for the log.
func victim(err error) (code string, ok bool) {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	if !ok || (pe.Code != codeDeadlockDetected && pe.Code != codeSerializationFailure) {
		return "", false
	}
	return pe.Code, true
}

// pgq is a pool or a transaction as sqlstore's database/sql-shaped
// Querier: its ? placeholders become $1, $2, and a QueryRow that finds no
// row reports sql.ErrNoRows.
type pgq struct{ q querier }

func (p pgq) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, sqlstore.Numbered(query), args...)
	return tag.RowsAffected(), err
}

func (p pgq) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	rows, err := p.q.Query(ctx, sqlstore.Numbered(query), args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (p pgq) QueryRow(ctx context.Context, query string, args ...any) sqlrows.Scanner {
	return pgRow{p.q.QueryRow(ctx, sqlstore.Numbered(query), args...)}
}

type pgRow struct{ row pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// isDuplicate reports whether err is a unique violation.
func isDuplicate(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == codeUniqueViolation
}

// ms stores a time as unix milliseconds, the zero time as 0.
func ms(t time.Time) int64 { return sqlrows.MS(t) }

// nullKey stores an empty idempotency key as NULL, which the unique
// constraint ignores.
func nullKey(k string) *string {
	if k == "" {
		return nil
	}
	return &k
}

// Ping reports whether the database answers; /readyz uses it.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }
