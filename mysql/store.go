// Package mysql is the flashsale.Store for MySQL 8 and MariaDB 10.11, the
// database of the distributed shape. Every counter change is a conditional
// UPDATE whose rows-affected count is checked, inside the same transaction
// as the order row it belongs to, so the database refuses an oversell even
// if the stock engine in front of it were wrong.
package mysql

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

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// MySQL and MariaDB error numbers the store branches on.
const (
	errDupEntry     = 1062 // ER_DUP_ENTRY: a unique key refused the row
	errLockDeadlock = 1213 // ER_LOCK_DEADLOCK: InnoDB chose this transaction as the victim
)

// Tunables with their defaults.
const (
	// MaxRetriesDefault is how many times a transaction that lost a deadlock
	// is run again before the error is returned.
	MaxRetriesDefault = sqlstore.MaxRetriesDefault
	// MigrateLockTimeoutDefault bounds the wait for another instance's migration.
	MigrateLockTimeoutDefault = 60 * time.Second
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a flashsale.Store backed by MySQL or MariaDB.
type Store struct {
	// shared is what the SQL servers do alike: ListSales, Sale, Sales,
	// NightStocks, CreateSale, UpdateSale, AdjustStock, SaleChanges,
	// DeleteSale, Order, OrderByKey, SaleOrders and the ModeBoard's, run
	// through this store's pool and transactions.
	shared
	// driver runs this store's transactions, for the frames of the writes
	// whose statements are MySQL's own (PlaceOrders, Transition,
	// FailOrder, ExpireHolds).
	driver sqlstore.Driver[*sql.Tx]
	db     *sql.DB
	logger *slog.Logger
}

type shared = sqlstore.Store

// dialect is what MySQL does differently in sqlstore's statements.
var dialect = sqlstore.Dialect{
	Date:     func(column string) string { return "DATE_FORMAT(" + column + ", '%Y-%m-%d')" },
	DateArg:  "?",
	NowMS:    nowMS,
	ForShare: "LOCK IN SHARE MODE",
	UpsertPart: `ON DUPLICATE KEY UPDATE phase = VALUES(phase), epoch = VALUES(epoch),
		selling = VALUES(selling), expires_at_ms = VALUES(expires_at_ms)`,
	IsDuplicate:  isDuplicate,
	InsertNights: insertNights,
}

// Roles is the store as the service takes it, with the boards where
// the deployment's instances agree and the waiting rooms' records.
func (s *Store) Roles() flashsale.Store {
	return flashsale.Store{SaleStore: s, OrderStore: s, Books: s, NoticeStore: s, Database: s, Modes: s, Forces: s, Queues: s}
}

// MaxOpenConnsDefault caps one instance's connections to the database.
const MaxOpenConnsDefault = 32

// Open connects to the database named by a URL of the form
// mysql://user:pass@host:port/db?params. Query parameters are passed to the
// driver, except the few the store depends on, which it sets itself:
// parseTime on, multiStatements off, clientFoundRows off (so an upsert that
// changed nothing reports 0 rows) and interpolateParams on (one round trip per
// statement instead of prepare, execute and close). It pings the server, so
// a wrong URL fails here rather than on the first purchase.
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*Store, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	// The batch writer and the reaper hold connections only briefly; keep
	// enough idle ones that a burst does not reconnect for every statement,
	// and cap the total so a burst of reads waits for a connection instead
	// of opening one per request past the server's max_connections.
	db.SetMaxOpenConns(MaxOpenConnsDefault)
	db.SetMaxIdleConns(16)
	db.SetConnMaxLifetime(30 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open mysql: ping %s: %w", cfg.Addr, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{db: db, logger: logger}
	s.driver = sqlstore.Driver[*sql.Tx]{
		Pool:    sqlstore.SQL(db, down),
		Dialect: dialect,
		Begin:   s.tx,
		Querier: func(tx *sql.Tx) sqlstore.Querier { return sqlstore.SQL(tx, down) },
		Victim:  deadlocked,
		Notices: s.writeNotices,
		Logger:  logger,
	}
	s.shared = sqlstore.New(s.driver)
	return s, nil
}

// parseURL turns the URL into a driver configuration.
func parseURL(rawURL string) (*gomysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("parse url: scheme %q is not mysql", u.Scheme)
	}
	cfg := gomysql.NewConfig()
	if u.RawQuery != "" {
		// ParseDSN understands every driver parameter; only the query part
		// goes through it so that passwords with odd characters are safe.
		if cfg, err = gomysql.ParseDSN("/?" + u.RawQuery); err != nil {
			return nil, fmt.Errorf("parse url parameters: %w", err)
		}
	}
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Hostname() + ":3306"
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, errors.New("parse url: database name is missing")
	}
	cfg.ParseTime = true
	cfg.MultiStatements = false
	cfg.ClientFoundRows = false
	cfg.InterpolateParams = true
	cfg.Loc = time.UTC
	return cfg, nil
}

// Close closes the connection pool.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the underlying pool, for tests and the audit command.
func (s *Store) DB() *sql.DB { return s.db }

// Migrate applies the embedded migrations that are not yet recorded in
// schema_migrations. Many instances may start at once, so it first takes a
// named lock (GET_LOCK, named after this database, whose name is hashed
// to fit MySQL 8's 64-character limit) on one connection and holds
// it until done; the others wait, then find nothing left to do. MySQL commits
// DDL implicitly, so every statement is written to be safe to run again
// (IF NOT EXISTS) should a migration be interrupted half way.
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()

	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT('flashsale_migrate.', MD5(DATABASE())), ?)",
		int(MigrateLockTimeoutDefault/time.Second)).Scan(&got)
	if err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("migrate: lock: another instance held the migration lock for %s", MigrateLockTimeoutDefault)
	}
	defer func() {
		// A fresh context: the lock must be released even if ctx is done.
		// Closing the connection would release it too, but it goes back to
		// the pool, so release it explicitly.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx),
			"SELECT RELEASE_LOCK(CONCAT('flashsale_migrate.', MD5(DATABASE())))"); err != nil {
			s.logger.Warn("release migration lock", "err", err)
		}
	}()

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version       INT          NOT NULL PRIMARY KEY,
		name          VARCHAR(200) NOT NULL,
		applied_at_ms BIGINT       NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	slices.Sort(files)
	for _, file := range files {
		name := strings.TrimPrefix(file, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: %s: name must start with a version number: %w", name, err)
		}
		if applied[version] {
			continue
		}
		body, err := migrations.ReadFile(file)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		// multiStatements is off, so each statement goes on its own.
		for _, stmt := range splitStatements(string(body)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate: %s: %w", name, err)
			}
		}
		if _, err := conn.ExecContext(ctx,
			"INSERT INTO schema_migrations (version, name, applied_at_ms) VALUES (?, ?, ?)",
			version, name, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migrate: %s: record: %w", name, err)
		}
		s.logger.Info("migration applied", "engine", "mysql", "migration", name)
	}
	return nil
}

// splitStatements splits a migration file at semicolons that end a line.
// Comment-only chunks are dropped. The migrations are ours, so no statement
// contains such a semicolon inside a string.
func splitStatements(body string) []string {
	var stmts []string
	for chunk := range strings.SplitSeq(body, ";\n") {
		var b strings.Builder
		for line := range strings.SplitSeq(chunk, "\n") {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
		if stmt := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(b.String()), ";")); stmt != "" {
			stmts = append(stmts, stmt)
		}
	}
	return stmts
}

// tx runs fn in a READ COMMITTED transaction: the Begin of s.driver,
// whose InTx runs it again from the start when InnoDB picks it as a
// deadlock victim. PlaceOrders, Transition and ExpireHolds lock orders,
// then user rows, then nights, each in key order, but a batch inserts its
// orders in batch order and its one-by-one fallback takes user rows after
// nights, so deadlocks are possible and expected to be rare; InnoDB rolls
// the victim back entirely and fn must start from scratch (PlaceOrders
// clears its results), so a rerun is always safe. READ COMMITTED keeps
// InnoDB from taking gap locks on the night ranges, which would only add
// more of them.
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return down(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return down(err)
	}
	return down(tx.Commit())
}

// down marks the driver's "the connection broke" as ErrUnavailable.
// database/sql retries driver.ErrBadConn on its own, but a connection that
// dies mid-query surfaces as the driver's ErrInvalidConn, and callers must
// see an outage (503, wait it out), not an internal error.
func down(err error) error {
	if errors.Is(err, gomysql.ErrInvalidConn) {
		return fmt.Errorf("%w: %w", flashsale.ErrUnavailable, err)
	}
	return err
}

// deadlocked reports whether err is InnoDB's choice of this transaction as
// a deadlock victim.
func deadlocked(err error) (code string, ok bool) {
	me, ok := errors.AsType[*gomysql.MySQLError](err)
	return "", ok && me.Number == errLockDeadlock
}

// isDuplicate reports whether err is a unique key violation.
func isDuplicate(err error) bool {
	me, ok := errors.AsType[*gomysql.MySQLError](err)
	return ok && me.Number == errDupEntry
}

// ms stores a time as unix milliseconds, the zero time as 0.
func ms(t time.Time) int64 { return sqlrows.MS(t) }

// nullKey stores an empty idempotency key as NULL, which the unique key ignores.
func nullKey(k string) sql.NullString { return sql.NullString{String: k, Valid: k != ""} }

// Ping reports whether the database answers; /readyz uses it.
func (s *Store) Ping(ctx context.Context) error { return down(s.db.PingContext(ctx)) }

// affected reports whether a statement changed a row.
func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// exists runs a COUNT(*) query and reports whether it counted a row.
func exists(ctx context.Context, q querier, query string, args ...any) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, query, args...).Scan(&n)
	return n > 0, err
}
