package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	goredis "github.com/redis/go-redis/v9"
)

// pipelineCounter counts the round trips a client makes: one per command
// or per pipeline.
type pipelineCounter struct{ commandCounter }

func (c *pipelineCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestLookupBatches: concurrent Lookups, some of whose callers give up at
// once, each get their own answer (the order their key names, or
// ErrNotFound), in far fewer round trips than calls, and nobody is left
// waiting for a batch a caller that gave up was to send.
func TestLookupBatches(t *testing.T) {
	e := MustOpenEngine(t, redisURL(t), newPrefix())
	snap := newSale(1, 1000)
	mustLoad(t, e, snap)
	const users = 200
	orders := map[string]string{}
	for i := range users / 2 {
		r := newReservation(snap, fmt.Sprintf("u%03d", i), 0, 1, 1)
		r.IdempotencyKey = "k"
		mustReserve(t, e, r)
		orders[r.UserID] = r.OrderID
	}
	var trips pipelineCounter
	e.client.AddHook(&trips)

	for round := range 20 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range users {
			user := fmt.Sprintf("u%03d", i)
			wg.Go(func() {
				ctx := t.Context()
				if i%7 == round%7 { // gives up before or while it waits
					c, cancel := context.WithCancel(ctx)
					cancel()
					ctx = c
				}
				<-start
				id, err := e.Lookup(ctx, snap.Sale.ID, user, "k")
				switch want, bought := orders[user]; {
				case ctx.Err() != nil && err != nil:
					if !errors.Is(err, flashsale.ErrUnavailable) && !errors.Is(err, flashsale.ErrNotFound) {
						t.Errorf("%s gave up: %v, want unavailable", user, err)
					}
				case bought && (err != nil || id != want):
					t.Errorf("Lookup(%s) = %q, %v; want %q", user, id, err, want)
				case !bought && !errors.Is(err, flashsale.ErrNotFound):
					t.Errorf("Lookup(%s) = %q, %v; want not found", user, id, err)
				}
			})
		}
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Lookups still waiting after 10 s", round)
		}
	}
	// With nothing in flight a Lookup is sent at once.
	if _, err := e.Lookup(t.Context(), snap.Sale.ID, "u000", "k"); err != nil {
		t.Fatal(err)
	}
	if n := trips.n.Load(); n > 20*users/2 {
		t.Errorf("%d lookups took %d round trips, want batches (at most half as many)", 20*users+1, n)
	}
	t.Logf("%d lookups, %d round trips", 20*users+1, trips.n.Load())
}
