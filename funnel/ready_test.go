package funnel_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
)

// slowSchema is a database whose read of the pending migrations can be
// made to miss its deadline while its ping answers.
type slowSchema struct {
	flashsale.Database
	slow atomic.Bool
}

func (d *slowSchema) PendingMigrations(ctx context.Context) ([]string, error) {
	if d.slow.Load() {
		return nil, context.DeadlineExceeded
	}
	return d.Database.PendingMigrations(ctx)
}

// TestReadySchemaReadSlow: a read of the pending migrations that misses
// the probe's deadline while the database answers its ping keeps the
// instance ready on the last read, if it is under 30 s old (TestStaleFlush
// saw one instance leave the load balancer so during a rebuild's drain on
// a loaded CI machine); older, the instance is not ready.
func TestReadySchemaReadSlow(t *testing.T) {
	ctx := context.Background()
	var db *slowSchema
	e := mustOpenWith(t, filepath.Join(t.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) {
		db = &slowSchema{Database: cfg.Store.Database}
		cfg.Store.Database = db
	})
	if r := e.svc.Ready(ctx); !r.Ready || r.Migrations != "ok" {
		t.Fatalf("ready = %+v, want ready", r)
	}
	db.slow.Store(true)
	e.clock.Advance(10 * time.Second)
	if r := e.svc.Ready(ctx); !r.Ready || r.Migrations != "ok" {
		t.Fatalf("a slow schema read 10 s after a good one: %+v, want ready on the last read", r)
	}
	e.clock.Advance(time.Minute)
	if r := e.svc.Ready(ctx); r.Ready || r.Migrations != "unknown" {
		t.Fatalf("the schema unread for a minute: %+v, want not ready", r)
	}
}
