package tracing_test

import (
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/stocktest"
	"github.com/flashsale/flashsale/storetest"
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
