package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/sqlite"
)

// migrator is what every store package offers besides flashsale.Store.
type migrator interface {
	flashsale.Store
	Migrate(ctx context.Context) error
}

// openStore opens the database FLASHSALE_DATABASE_URL names and applies its
// migrations (idempotent, and safe when several instances start at once).
func OpenStore(ctx context.Context, cfg Config, logger *slog.Logger) (flashsale.Store, error) {
	s, _, err := openStoreBoard(ctx, cfg, logger)
	return s, err
}

// boards are where the instances of a deployment agree, in the SQL
// servers: the sell mode and the operator's breaker override (both nil for
// SQLite, which has no other instances to agree with).
type boards struct {
	mode   flashsale.ModeBoard
	forces flashsale.ForceBoard
}

// openStoreBoard is openStore, with the boards of the SQL servers.
func openStoreBoard(ctx context.Context, cfg Config, logger *slog.Logger) (flashsale.Store, boards, error) {
	var (
		s     migrator
		board boards
		err   error
	)
	system, path := database(cfg.DatabaseURL)
	switch system {
	case dbSQLite:
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, boards{}, fmt.Errorf("create data dir: %w", err)
		}
		// Create the file owner-only before SQLite does; its -wal and -shm
		// files take the database file's mode. (err is the function's: a
		// shadowed one here once dropped sqlite.Open's error and Migrate
		// ran on a nil store.)
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return nil, boards{}, fmt.Errorf("create database: %w", err)
		}
		f.Close()
		s, err = sqlite.Open(ctx, path, logger)
	case dbMySQL:
		var my *mysql.Store
		my, err = mysql.Open(ctx, cfg.DatabaseURL, logger)
		s, board = my, boards{my, my}
	case dbPostgres:
		var pg *postgres.Store
		pg, err = postgres.Open(ctx, cfg.DatabaseURL, logger)
		s, board = pg, boards{pg, pg}
	default:
		return nil, boards{}, fmt.Errorf("unsupported database url %s", MaskURL(cfg.DatabaseURL))
	}
	if err != nil {
		return nil, boards{}, fmt.Errorf("open database: %w", err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, boards{}, fmt.Errorf("migrate: %w", err)
	}
	return s, board, nil
}

// SQLiteURL is the database serve keeps in dataDir when
// FLASHSALE_DATABASE_URL is not set.
func SQLiteURL(dataDir string) string { return "sqlite://" + filepath.Join(dataDir, "flashsale.db") }

// The database systems FLASHSALE_DATABASE_URL can name, as the traces'
// db.system.name calls them.
const (
	dbSQLite   = "sqlite"
	dbMySQL    = "mysql"
	dbPostgres = "postgresql"
)

// database is the one reading of a FLASHSALE_DATABASE_URL: the system it
// names ("" for a scheme of none of them) and, for SQLite, the file.
func database(url string) (system, path string) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		return dbSQLite, strings.TrimPrefix(url, "sqlite://")
	case strings.HasPrefix(url, "mysql://"):
		return dbMySQL, ""
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return dbPostgres, ""
	}
	return "", ""
}

// engineSystem names the stock engine for the traces.
func engineSystem(cfg Config) string {
	if cfg.RedisURL != "" {
		return "redis"
	}
	return "inmem"
}
