package funnel

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/sqlite"
)

// fakeFence is the fence in memory, with one other instance whose consumer
// the test pauses by hand.
type fakeFence struct {
	mu     sync.Mutex
	lease  string
	beats  map[string]string // instance -> paused epoch
	lost   *losingEngine
	events *eventLog
}

func (f *fakeFence) Lead(_ context.Context, epoch string, _ time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease != "" {
		return false, nil
	}
	f.lease = epoch
	return true, nil
}

func (f *fakeFence) Extend(_ context.Context, epoch string, _ time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease == epoch, nil
}

func (f *fakeFence) End(_ context.Context, epoch string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == epoch {
		f.lease = ""
	}
	return nil
}

func (f *fakeFence) Healing(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease, nil
}

func (f *fakeFence) Beat(_ context.Context, instance, paused string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats[instance] = paused
	return nil
}

func (f *fakeFence) Paused(_ context.Context, epoch string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var waiting []string
	for id, p := range f.beats {
		if p != epoch {
			waiting = append(waiting, id)
		}
	}
	return waiting, nil
}

func (f *fakeFence) Unload(_ context.Context, saleID string) error {
	f.lost.lose(saleID)
	return nil
}

// pauseOther reports the other instance paused for the lease in progress.
func (f *fakeFence) pauseOther() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats["other"] = f.lease
	f.events.add("other paused")
}

// losingEngine is the in-process engine, made to lose sales on demand as
// a Redis restarted empty would.
type losingEngine struct {
	*inmem.Engine
	mu     sync.Mutex
	gone   map[string]bool
	events *eventLog
}

func (e *losingEngine) lose(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gone[id] = true
}

func (e *losingEngine) Available(ctx context.Context, id string) ([]int, error) {
	e.mu.Lock()
	gone := e.gone[id]
	e.mu.Unlock()
	if gone {
		return nil, flashsale.ErrNotLoaded
	}
	return e.Engine.Available(ctx, id)
}

// AvailableOf leaves out the lost sales, as Available answers them.
func (e *losingEngine) AvailableOf(ctx context.Context, ids []string) (map[string][]int, error) {
	out := make(map[string][]int)
	for _, id := range ids {
		if units, err := e.Available(ctx, id); err == nil {
			out[id] = units
		}
	}
	return out, nil
}

// Missing is the lost sales and those the engine never had, as
// Available answers them.
func (e *losingEngine) Missing(ctx context.Context, ids []string) ([]string, error) {
	var missing []string
	for _, id := range ids {
		_, err := e.Available(ctx, id)
		switch {
		case errors.Is(err, flashsale.ErrNotLoaded):
			if !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		case err != nil:
			return nil, err
		}
	}
	return missing, nil
}

func (e *losingEngine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	if err := e.Engine.Load(ctx, snap, now); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.gone, snap.Sale.ID)
	e.mu.Unlock()
	e.events.add("load")
	return nil
}

type fakeDrainer struct{ events *eventLog }

func (d *fakeDrainer) Pause(context.Context) error { d.events.add("pause"); return nil }
func (d *fakeDrainer) Resume()                     { d.events.add("resume") }
func (d *fakeDrainer) Drain(context.Context) error { d.events.add("drain"); return nil }

func (d *fakeDrainer) Backlog(context.Context) (int, error) { return 0, nil }

type eventLog struct {
	mu sync.Mutex
	at []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, e)
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.at...)
}

// TestHealFence: a rebuild loads nothing until the other instance has
// paused its consumer and the queue was drained, and a second rebuild
// cannot start while one holds the lease.
func TestHealFence(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "fs.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	engine := &losingEngine{Engine: inmem.NewEngine(), gone: map[string]bool{}, events: events}
	fence := &fakeFence{beats: map[string]string{"other": ""}, lost: engine, events: events}
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	defer writer.Close()
	svc := New(Config{
		Store: store.Roles(), Engine: flashsale.EngineOf(engine), Writer: writer, Secret: []byte("s"),
		Fence: fence, Drainer: &fakeDrainer{events: events}, Instance: "self",
		HealGrace: 50 * time.Millisecond, ReapInterval: time.Hour,
	})
	start := time.Now().Add(-time.Minute)
	sale, err := svc.CreateSale(ctx, fixture.Sale(fixture.Stock(5), fixture.Price(100, 200), fixture.Window(start, start.Add(time.Hour)),
		fixture.Hold(60)))
	if err != nil {
		t.Fatal(err)
	}
	events.at = nil
	engine.lose(sale.ID)

	done := make(chan error, 1)
	go func() {
		svc.healing.mu.Lock()
		defer svc.healing.mu.Unlock()
		done <- svc.healing.heal(ctx, []string{sale.ID}, nil)
	}()
	// Well past the grace, the other instance has not paused: nothing may load.
	time.Sleep(400 * time.Millisecond)
	if err := svc.healing.heal(ctx, []string{sale.ID}, nil); !errors.Is(err, errHealBusy) {
		t.Errorf("a second rebuild during the first = %v, want errHealBusy", err)
	}
	for _, e := range events.list() {
		if e == "drain" || e == "load" {
			t.Fatalf("%s before the other instance paused: %v", e, events.list())
		}
	}
	fence.pauseOther()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := events.list()
	want := []string{"pause", "other paused", "drain", "load", "resume"}
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events = %v, want %v", got, want)
		}
	}
	if avail, err := engine.Available(ctx, sale.ID); err != nil || avail[0] != 5 {
		t.Errorf("after the rebuild: %v, %v; want 5 available", avail, err)
	}
	if lease, _ := fence.Healing(ctx); lease != "" {
		t.Errorf("lease %q still held after the rebuild", lease)
	}
}

// TestRebuildInProcess rebuilds a live sale of the in-process engine again
// and again while guests buy it: every purchase's units are either in the
// snapshot or taken after the load, never lost or counted twice, so the
// sale sells exactly its stock and no 202 ends failed.
func TestRebuildInProcess(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "fs.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	engine := inmem.NewEngine()
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	defer writer.Close()
	// A slow order path keeps reservations in flight for a while, as a
	// group commit under load does.
	slow := slowWriter{writer}
	svc := New(Config{Store: store.Roles(), Engine: engine.Roles(), Writer: slow, Secret: []byte("s"), ReapInterval: time.Hour})
	start := time.Now().Add(-time.Minute)
	const stock = 300
	sale, err := svc.CreateSale(ctx, fixture.Sale(fixture.Stock(stock), fixture.Price(100, 200), fixture.Window(start, start.Add(time.Hour)),
		fixture.Hold(60)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var rebuilds sync.WaitGroup
	rebuilds.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := svc.healing.rebuild(ctx, sale.ID); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var accepted, failed sync.Map
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 15 {
				u := flashsale.User{ID: fmt.Sprintf("guest-%d-%d", g, i)}
				o, err := svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: sale.ID})
				switch {
				case err == nil:
					accepted.Store(o.ID, true)
				case errors.Is(err, flashsale.ErrSoldOut):
				default:
					failed.Store(u.ID, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rebuilds.Wait()
	failed.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })
	n := 0
	accepted.Range(func(any, any) bool { n++; return true })
	nights, err := store.NightStocks(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	avail, err := engine.Available(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	// An engine that counted wrong shows as orders the database refused
	// (failed rows), though their guests were told sold_out, not 202.
	snap, err := store.Snapshot(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range snap.Reservations {
		if !r.Active {
			t.Errorf("order %s was refused by the database: the engine handed out a room it did not have", r.OrderID)
		}
	}
	if n != stock || nights[0].Held != stock || avail[0] != 0 {
		t.Fatalf("%d accepted, database held %d, engine available %d; want %d, %d, 0", n, nights[0].Held, avail[0], stock, stock)
	}
}

type slowWriter struct{ w flashsale.OrderWriter }

func (s slowWriter) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	time.Sleep(2 * time.Millisecond)
	return s.w.Write(ctx, r)
}
