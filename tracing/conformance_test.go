package tracing_test

import (
	"log/slog"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/stocktest"
	"github.com/flashsale/flashsale/storetest"
	"github.com/flashsale/flashsale/writertest"
)

// TestEngineConformance: the traced engine is a stock engine like any
// other, which is what stocktest exists to catch in wrappers.
func TestEngineConformance(t *testing.T) {
	tr, _ := MustOpen(t)
	stocktest.Run(t, func(testing.TB) flashsale.StockEngine { return tr.Engine(inmem.NewEngine().Roles(), "inmem") })
}

// TestStoreConformance: the traced store passes the suite every store
// passes, on SQLite.
func TestStoreConformance(t *testing.T) {
	tr, _ := MustOpen(t)
	storetest.Run(t, func(tb testing.TB) flashsale.Store { return tr.Store(mustOpenSQLite(tb).Roles(), "sqlite") })
}

// TestWriterConformance: the traced group-commit writer passes the suite
// every order writer passes, on SQLite.
func TestWriterConformance(t *testing.T) {
	tr, _ := MustOpen(t)
	writertest.Run(t, func(tb testing.TB) writertest.Harness {
		store := mustOpenSQLite(tb)
		w := inmem.NewWriter(store, inmem.WriterConfig{}, slog.New(slog.DiscardHandler))
		tb.Cleanup(func() { w.Close() })
		return writertest.Harness{Writer: tr.Writer(w), Store: store.Roles()}
	})
}
