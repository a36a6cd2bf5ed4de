package storetest

import (
	"context"
	"log/slog"
	"testing"
)

// MustOpen opens a store with open on the database url names, logging to
// the test's output, applies its migrations and closes it when the test
// ends: the opener each SQL store's tests share, where each instance of a
// deployment would open its own.
func MustOpen[S interface {
	Migrate(ctx context.Context) error
	Close() error
}](tb testing.TB, open func(ctx context.Context, url string, logger *slog.Logger) (S, error), url string) S {
	tb.Helper()
	s, err := open(context.Background(), url, slog.New(slog.NewTextHandler(tb.Output(), nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}
