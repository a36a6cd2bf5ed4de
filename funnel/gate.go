package funnel

import (
	"context"
	"sync"

	"github.com/flashsale/flashsale"
)

// EngineInFlightPerSale bounds one sale's reserves in flight to the stock
// engine from one instance. It is far more than the engine can use at
// once (a Redis shard runs one script at a time; a reserve is tens of
// microseconds there) and few enough that the sold-out flag stops a burst.
const EngineInFlightPerSale = 32

// engineGate holds a sale's purchases beyond EngineInFlightPerSale back
// from the engine, where the sold-out flag is read again as each one's turn
// comes. Without it a burst waits in the engine's connection pool instead,
// each purchase past the flag paying a round trip to hear sold out: a
// 100-room sale's burst of 3 400 purchases sent 1 768 reserves to Redis,
// 94% of them answered sold out, and Redis's queue was the burst's p99
// (issue 26). Admission (admit.go) still sheds what is beyond its bounds;
// this only orders what it admitted.
type engineGate struct {
	sales sync.Map // sale ID -> chan struct{}, EngineInFlightPerSale slots
}

// enter waits for a slot of saleID's until ctx ends; the caller gives the
// slot back with leave once the engine has answered.
func (g *engineGate) enter(ctx context.Context, saleID string) (chan struct{}, error) {
	c, ok := g.sales.Load(saleID)
	if !ok {
		c, _ = g.sales.LoadOrStore(saleID, make(chan struct{}, EngineInFlightPerSale))
	}
	slots := c.(chan struct{})
	select {
	case slots <- struct{}{}:
		return slots, nil
	default:
	}
	select {
	case slots <- struct{}{}:
		return slots, nil
	case <-ctx.Done():
		return nil, flashsale.ErrOverloaded // nothing was taken: retry
	}
}

func (g *engineGate) leave(slots chan struct{}) { <-slots }

// forget drops a sale's slots: it is deleted or over for good.
func (g *engineGate) forget(saleID string) { g.sales.Delete(saleID) }
