package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// Name returns a fresh random name with prefix, for a test's own database,
// key prefix or queue.
func Name(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// MySQLDatabase creates a database of its own for the test on the server
// FLASHSALE_TEST_MYSQL_URL names, drops it when the test ends, and returns
// its mysql:// URL.
func MySQLDatabase(tb testing.TB) string {
	tb.Helper()
	u, err := url.Parse(URL(tb, MySQL))
	if err != nil {
		tb.Fatal(err)
	}
	pass, _ := u.User.Password()
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd = "tcp", u.Host, u.User.Username(), pass
	exec := func(stmt string) error {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.Exec(stmt)
		return err
	}
	name := Name("fs_")
	if err := exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + name); err != nil {
			tb.Error(err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

// PostgresDatabase creates a database of its own for the test on the server
// FLASHSALE_TEST_POSTGRES_URL names, drops it when the test ends, and
// returns its postgres:// URL.
func PostgresDatabase(tb testing.TB) string {
	tb.Helper()
	base := URL(tb, Postgres)
	exec := func(stmt string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	name := Name("fs_")
	if err := exec("CREATE DATABASE " + name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			tb.Error(err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
