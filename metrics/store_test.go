package metrics_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/storetest"
)

// TestStore: the wrapper is a store like any other; it passes the suite
// every store passes, on SQLite.
func TestStore(t *testing.T) {
	m := metrics.New(metrics.Config{})
	storetest.Run(t, func(tb testing.TB) flashsale.Store {
		s, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "flashsale.db"), slog.New(slog.DiscardHandler))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		if err := s.Migrate(tb.Context()); err != nil {
			tb.Fatal(err)
		}
		return m.Store(s.Roles())
	})
}
