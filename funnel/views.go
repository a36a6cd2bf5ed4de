package funnel

import (
	"context"
	"time"

	"github.com/maypok86/otter/v2"
)

// ViewMaxAgeShared is the ViewMaxAge of an engine the instances share
// (Redis): a sale's page views and the sale list cost the engine one read
// per sale every 100 ms per instance, however many guests refresh.
const ViewMaxAgeShared = 100 * time.Millisecond

// leftCache keeps each sale's rooms left per night as the engine last gave
// them, for at most maxAge, for the public view and the sale list: the
// page every guest refreshes before the start. Read from Redis each time,
// a view cost 35 µs of the sale's shard's one core (docs/capacity.md): at
// 15 000 views a second one sale's page would take the shard that also
// sells it. A purchase is never judged by this copy; the engine decides.
// With maxAge 0 every view reads the engine (the in-process engine, whose
// read is a map lookup).
type leftCache struct {
	engine func(ctx context.Context, saleID string) ([]int, error)
	// left is nil when maxAge is 0. Its Get collapses concurrent misses
	// of a sale into one read; an error is not kept, so a sale the engine
	// lost (ErrNotLoaded) is asked about again at the next view.
	left *otter.Cache[string, []int]
}

// leftCacheMax bounds the sales kept: far more than are live at once.
const leftCacheMax = 10_000

func newLeftCache(engine func(ctx context.Context, saleID string) ([]int, error), maxAge time.Duration) *leftCache {
	r := &leftCache{engine: engine}
	if maxAge > 0 {
		r.left = otter.Must(&otter.Options[string, []int]{
			MaximumSize:      leftCacheMax,
			ExpiryCalculator: otter.ExpiryWriting[string, []int](maxAge),
		})
	}
	return r
}

// get returns a sale's rooms left per night, at most maxAge old. The
// caller must not change the slice.
func (r *leftCache) get(ctx context.Context, saleID string) ([]int, error) {
	if r.left == nil {
		return r.engine(ctx, saleID)
	}
	return r.left.Get(ctx, saleID, otter.LoaderFunc[string, []int](func(ctx context.Context, saleID string) ([]int, error) {
		// One guest's read serves every guest waiting on it: one leaving
		// must not fail the others (the engine's own timeout bounds it).
		return r.engine(context.WithoutCancel(ctx), saleID)
	}))
}

// close stops the cache's own goroutines.
func (r *leftCache) close() {
	if r.left != nil {
		r.left.StopAllGoroutines()
	}
}
