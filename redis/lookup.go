package redis

import (
	"context"
	"errors"
	"sync"

	"github.com/flashsale/flashsale"
	goredis "github.com/redis/go-redis/v9"
)

// lookupBatchMax bounds one pipeline of lookups.
const lookupBatchMax = 512

// lookups sends concurrent Lookups as pipelines: the first caller to find
// none in flight sends what is queued, itself included, and hands the
// next batch to the first caller queued behind it. A sale's sell-out
// turns every keyed purchase still arriving into a lookup (its key may
// name an earlier attempt's order); one round trip each, a burst's 1 300
// of them waited 63 ms on average in the connection pool, among the
// burst's slowest answers (issue 26). Batched, they cost one round trip a
// batch, in the instance and in Redis. No goroutine is its own: a Lookup
// with nothing in flight sends at once.
type lookups struct {
	mu      sync.Mutex
	queue   []*lookupCall
	sending bool
}

// lookupCall is one Lookup: its key and field, then its answer. done is
// closed when the answer is in, or when the call is to send the next
// batch (lead). gone marks a caller that gave up: it is never given the
// lead (nobody would send), and its answer is dropped.
type lookupCall struct {
	key, field string
	id         string
	err        error
	lead, gone bool
	done       chan struct{}
}

// Lookup returns the order ID bound to a user's idempotency key.
func (e *Engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	c := &lookupCall{key: e.saleKeys(saleID).keys, field: keyField(userID, key), done: make(chan struct{})}
	l := &e.lookups
	l.mu.Lock()
	l.queue = append(l.queue, c)
	lead := !l.sending
	l.sending = true
	l.mu.Unlock()
	if !lead {
		select {
		case <-c.done:
		case <-ctx.Done():
			l.mu.Lock()
			if !c.lead {
				c.gone = true
				l.mu.Unlock()
				return "", unavailable("lookup: sale="+saleID, ctx.Err())
			}
			l.mu.Unlock() // handed the lead as it gave up: send all the same
		}
		if !c.lead {
			return c.answer(saleID)
		}
	}
	e.sendLookups()
	return c.answer(saleID)
}

// sendLookups sends the queued calls (this caller's among them) and hands
// the lead to the first call queued since that still waits, or ends it.
// The batch's context is no caller's: it answers every caller in it,
// whichever gives up, and e.timeout bounds it.
func (e *Engine) sendLookups() {
	l := &e.lookups
	l.mu.Lock()
	n := min(len(l.queue), lookupBatchMax)
	batch := l.queue[:n:n]
	l.queue = l.queue[n:]
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	cmds, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, c := range batch {
			p.HGet(ctx, c.key, c.field)
		}
		return nil
	})
	cancel()
	for i, c := range batch {
		if i < len(cmds) {
			c.id, c.err = cmds[i].(*goredis.StringCmd).Result()
		} else {
			c.err = err
		}
	}

	l.mu.Lock()
	var next *lookupCall
	for len(l.queue) > 0 && l.queue[0].gone {
		l.queue = l.queue[1:]
	}
	if len(l.queue) > 0 {
		next = l.queue[0]
		next.lead = true
	} else {
		l.queue = nil // let the backing array go
		l.sending = false
	}
	l.mu.Unlock()
	for _, c := range batch {
		if !c.lead {
			close(c.done)
		}
	}
	if next != nil {
		close(next.done)
	}
}

// answer is the call's result as Lookup returns it.
func (c *lookupCall) answer(saleID string) (string, error) {
	switch {
	case errors.Is(c.err, goredis.Nil):
		return "", flashsale.ErrNotFound
	case c.err != nil:
		return "", unavailable("lookup: sale="+saleID, c.err)
	}
	return c.id, nil
}
