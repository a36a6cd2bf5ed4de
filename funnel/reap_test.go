package funnel_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
)

// slowReleaseEngine holds every Release until open is closed, then takes
// delay more, like a loaded Redis round trip; it counts Releases per order
// and the most running at once.
type slowReleaseEngine struct {
	*inmem.Engine
	delay   time.Duration
	open    chan struct{}
	entered chan struct{} // closed by the first Release
	once    sync.Once

	mu                  sync.Mutex
	released            map[string]int
	running, mostAtOnce int
}

func (g *slowReleaseEngine) Release(ctx context.Context, saleID, orderID string) error {
	g.mu.Lock()
	g.running++
	g.mostAtOnce = max(g.mostAtOnce, g.running)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.running--; g.mu.Unlock() }()
	g.once.Do(func() { close(g.entered) })
	<-g.open
	time.Sleep(g.delay)
	g.mu.Lock()
	g.released[orderID]++
	g.mu.Unlock()
	return g.Engine.Release(ctx, saleID, orderID)
}

// TestReapExpiresWhileReleasing: holds that end while Reap is still
// releasing an earlier batch in the engine are expired in the database
// without waiting for those releases (I5 counts to the database's expiry;
// in CI, a batch's releases on a loaded machine pushed the next holds' p99
// past 1 s). Reap still returns only once every hold it expired is
// released in the engine, each exactly once.
func TestReapExpiresWhileReleasing(t *testing.T) {
	const first, second = 3 * funnel.ReapWorkersDefault, funnel.ReapWorkersDefault
	ctx := context.Background()
	c := newClock()
	store := mustSQLite(t, filepath.Join(t.TempDir(), "fs.db"))
	g := &slowReleaseEngine{Engine: inmem.NewEngine(), delay: 20 * time.Millisecond,
		open: make(chan struct{}), entered: make(chan struct{}), released: map[string]int{}}
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	// Not started: the test's Reap is the only one, polling every 10 ms.
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: store.Roles(), Engine: flashsale.EngineOf(g), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: 10 * time.Millisecond,
	})
	e := &env{svc: svc, store: store.Roles(), engine: g.Engine, writer: writer, clock: c}
	t.Cleanup(func() { e.close(t) })

	s := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, first+second)
	buy := func(n int, prefix string) []string {
		var ids []string
		for i := range n {
			o, err := svc.Purchase(ctx, flashsale.User{ID: fmt.Sprintf("%s%d", prefix, i)}, flashsale.PurchaseRequest{SaleID: s.ID})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
		return ids
	}
	wave1 := buy(first, "a")
	c.Advance(10 * time.Second)
	wave2 := buy(second, "b") // ends 10 s after wave 1
	c.Advance(20 * time.Second)

	reaped := make(chan int)
	go func() { reaped <- svc.Reap(ctx) }()
	// finish lets the releases go and waits for Reap, once, also when
	// the test fails before it.
	var (
		finished bool
		n        int
	)
	finish := func() int {
		if !finished {
			finished = true
			close(g.open)
			n = <-reaped
		}
		return n
	}
	defer finish()

	<-g.entered // wave 1 expired in the database; its releases are held
	c.Advance(10 * time.Second)
	start := time.Now()
	for _, id := range wave2 {
		for {
			o, err := store.Order(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status == flashsale.OrderExpired {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("wave 2 still %s in the database after %v while wave 1 is being released: expiry waits for releases", o.Status, time.Since(start))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("wave 2 expired in the database %v after its end, wave 1's releases still held", time.Since(start))
	select {
	case n := <-reaped:
		t.Fatalf("Reap returned %d before its releases ran", n)
	default:
	}

	if n := finish(); n != first+second {
		t.Errorf("reaped %d, want %d", n, first+second)
	}
	g.mu.Lock()
	for _, id := range append(wave1, wave2...) {
		if n := g.released[id]; n != 1 {
			t.Errorf("order %s released %d times, want 1", id, n)
		}
	}
	if len(g.released) != first+second {
		t.Errorf("%d orders released, want %d", len(g.released), first+second)
	}
	if g.mostAtOnce > funnel.ReapWorkersDefault {
		t.Errorf("%d releases ran at once, want at most %d", g.mostAtOnce, funnel.ReapWorkersDefault)
	}
	g.mu.Unlock()
	if n := e.nights(t, s.ID)[0]; n.Held != 0 || n.Available != first+second {
		t.Fatalf("night = %+v, want all %d available", n, first+second)
	}
}
