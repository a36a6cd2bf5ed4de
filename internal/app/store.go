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

// OpenStore opens the database FLASHSALE_DATABASE_URL names and applies its
// migrations (idempotent, and safe when several instances start at once).
// The store's boards (flashsale.Store.Modes and Forces) are the SQL
// servers'; SQLite has none.
func OpenStore(ctx context.Context, cfg Config, logger *slog.Logger) (flashsale.Store, error) {
	var (
		s   flashsale.Store
		err error
	)
	system, path := database(cfg.DatabaseURL)
	switch system {
	case dbSQLite:
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return flashsale.Store{}, fmt.Errorf("create data dir: %w", err)
		}
		// Create the file owner-only before SQLite does; its -wal and -shm
		// files take the database file's mode. (err is the function's: a
		// shadowed one here once dropped sqlite.Open's error and Migrate
		// ran on a nil store.)
		var f *os.File
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return flashsale.Store{}, fmt.Errorf("create database: %w", err)
		}
		f.Close()
		var lite *sqlite.Store
		if lite, err = sqlite.Open(ctx, path, logger); err == nil {
			s = lite.Roles()
		}
	case dbMySQL:
		var my *mysql.Store
		if my, err = mysql.Open(ctx, cfg.DatabaseURL, logger); err == nil {
			s = my.Roles()
		}
	case dbPostgres:
		var pg *postgres.Store
		if pg, err = postgres.Open(ctx, cfg.DatabaseURL, logger); err == nil {
			s = pg.Roles()
		}
	default:
		return flashsale.Store{}, fmt.Errorf("unsupported database url %s", MaskURL(cfg.DatabaseURL))
	}
	if err != nil {
		return flashsale.Store{}, fmt.Errorf("open database: %w", err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return flashsale.Store{}, fmt.Errorf("migrate: %w", err)
	}
	return s, nil
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
