package funnel

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/maypok86/otter/v2"
)

// Reads a flood must not take to the database: the IDs of sales that do
// not exist (a scalper probing, a stale link shared a million times) and
// the list of current sales (every guest's landing page). A sale itself is
// cached in Service.sales and refreshed when its revision moves
// (lifecycle.go).
const (
	// unknownTTL is how long an ID the database did not have is answered
	// 404 from memory. A sale's ID is made when it is created, so no ID
	// is asked for before its sale exists but by guessing.
	unknownTTL = 5 * time.Second
	unknownMax = 100_000
	// listTTL is how long the list of current sales is reused, give or take
	// listJitter so that instances do not all reload it in the same
	// instant. A new sale on this instance shows at once (CreateSale drops
	// the list); one created on another shows within listTTL.
	listTTL    = time.Second
	listJitter = 250 * time.Millisecond
)

// reads is the cache of those reads (otter: bounded, expiring, and Get
// collapses concurrent misses of a key into one load).
type reads struct {
	unknown *otter.Cache[string, struct{}]
	list    *otter.Cache[struct{}, []*flashsale.Sale]
}

func newReads() *reads {
	return &reads{
		unknown: otter.Must(&otter.Options[string, struct{}]{
			MaximumSize:      unknownMax,
			ExpiryCalculator: otter.ExpiryWriting[string, struct{}](unknownTTL),
		}),
		list: otter.Must(&otter.Options[struct{}, []*flashsale.Sale]{
			MaximumSize: 1,
			ExpiryCalculator: otter.ExpiryWritingFunc(func(otter.Entry[struct{}, []*flashsale.Sale]) time.Duration {
				return listTTL - listJitter + rand.N(2*listJitter)
			}),
		}),
	}
}

// currentSales is store.Sales(now) through the list cache. The cached list
// may hold a sale that has ended since; callers filter by status at now.
func (s *Service) currentSales(ctx context.Context) ([]*flashsale.Sale, error) {
	return s.reads.list.Get(ctx, struct{}{}, otter.LoaderFunc[struct{}, []*flashsale.Sale](
		func(ctx context.Context, _ struct{}) ([]*flashsale.Sale, error) {
			return s.store.Sales(ctx, s.now())
		}))
}
