package funnel_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/storetest"
	"github.com/flashsale/flashsale/writertest"
)

// TestConfirmingWriterConformance: the writer that confirms the engine's
// outbox after each accepted write is an order writer like any other (over
// the group-commit writer on SQLite), which is what writertest exists to
// catch in wrappers.
func TestConfirmingWriterConformance(t *testing.T) {
	writertest.Run(t, func(tb testing.TB) writertest.Harness {
		store := storetest.MustOpen(tb, sqlite.Open, filepath.Join(tb.TempDir(), "fs.db"))
		w := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
		tb.Cleanup(func() { w.Close() })
		cw := &funnel.ConfirmingWriter{W: w, Outbox: &fakeOutbox{}, Logger: slog.New(slog.DiscardHandler)}
		return writertest.Harness{Writer: cw, Store: store.Roles()}
	})
}
