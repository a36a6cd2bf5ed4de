package funnel_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestOutboxPruned: an instance started with a retention deletes the
// events older than it (no transport is configured, so none waits for
// them) and keeps the younger ones; without a retention it keeps all.
func TestOutboxPruned(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "fs.db")
	store := mustSQLite(t, path)
	defer store.Close()
	start := func(retention time.Duration) (*funnel.Service, func()) {
		writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
		testenv.Load(t) // a load a timed test waits out (testenv.Alone)
		svc := funnel.New(funnel.Config{Store: store.Roles(), Engine: inmem.NewEngine().Roles(), Writer: writer, Secret: []byte("s"),
			Now: c.Now, OutboxRetention: retention})
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return svc, func() { svc.Close(); writer.Close() }
	}
	events := func() int {
		t.Helper()
		ns, ok, err := store.ClaimNotices(ctx, "check-"+c.Now().Format("150405.000"), "test", time.Now().Add(time.Second), 1000)
		if err != nil || !ok {
			t.Fatalf("ClaimNotices = %v, %v", ok, err)
		}
		return len(ns)
	}

	svc, stop := start(0)
	e := &env{svc: svc, store: store.Roles(), clock: c}
	s := e.sale(t, nil, 5)
	for _, u := range []flashsale.User{alice, bob} {
		if _, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if n := events(); n != 2 {
		t.Fatalf("%d events after two orders, want 2", n)
	}

	// Two hours on, with a day's retention: nothing is old enough, and
	// the holds expire (two events of now).
	c.Advance(2 * time.Hour)
	_, stop = start(24 * time.Hour)
	waitEvents(t, events, 4, "a day's retention, once the holds expired")
	stop()

	// With an hour's retention the held events are old, the expiries not.
	_, stop = start(time.Hour)
	defer stop()
	waitEvents(t, events, 2, "an hour's retention")
}

// waitEvents waits up to 5 s for the outbox to hold want events.
func waitEvents(t *testing.T, events func() int, want int, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); events() != want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events with %s, want %d", events(), what, want)
		}
	}
}
