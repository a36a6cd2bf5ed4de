package redis

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
)

// The outbox closes the gap between Redis and the broker in the distributed
// shape: reserve.lua adds every new order to the sale's :unconfirmed sorted
// set (scored by reserve time) in the same atomic step as the deduction;
// Confirm removes it once RabbitMQ has confirmed the publish. An order
// still there after a while was reserved by a process that died before
// its publish was confirmed, and a relay republishes it (the consumer's
// unique order ID makes a second delivery harmless). Release also removes
// the order: a released reservation must never be republished.

var _ flashsale.Outbox = (*Engine)(nil)

// Confirm records that the broker confirmed the publish of an order. It
// only queues the removal from the outbox and returns: a background
// goroutine removes every queued order of a sale with one ZREM, all sales
// in one pipeline, so the confirms of many purchases share a round trip.
// Losing a queued confirm (a crash) is harmless: the relay republishes the
// order and the consumer treats it as a duplicate. When the queue is full
// or the engine is closed the removal is sent at once, with ctx.
func (e *Engine) Confirm(ctx context.Context, saleID, orderID string) error {
	k := e.saleKeys(saleID)
	if e.lazy.add(lazyWrite{key: k.unconfirmed, member: orderID}) {
		return nil
	}
	if err := e.client.ZRem(ctx, k.unconfirmed, orderID).Err(); err != nil {
		return unavailable("confirm: sale="+saleID+" order="+orderID, err)
	}
	return nil
}

// Defaults of the lazy writer.
const (
	// lazyQueueMax bounds the writes waiting for the background goroutine:
	// a Redis that stopped answering must not grow the queue without end.
	// Past it, Confirm writes directly and stale index entries are left to
	// expire.
	lazyQueueMax = 16384
	// lazyTimeout bounds one flush, so Close never hangs on a dead Redis.
	lazyTimeout = 5 * time.Second
)

// lazyWrite is a write whose caller does not wait for it: ZREM member from
// key, or DEL key.
type lazyWrite struct {
	key, member string
	del         bool
}

// lazyWriter sends queued lazyWrites from one goroutine, as a group commit
// without a timer: it takes whatever is queued, sends it as one pipeline,
// and meanwhile the next group gathers. At a low rate each write goes
// alone and at once; under load a group grows to what arrives during one
// round trip, with no added latency.
type lazyWriter struct {
	e    *Engine
	wake chan struct{} // capacity 1: "the queue is not empty"
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run has returned

	mu     sync.Mutex
	queue  []lazyWrite
	max    int // lazyQueueMax; tests lower it
	closed bool
}

func (w *lazyWriter) start(e *Engine) {
	w.e, w.max = e, lazyQueueMax
	w.wake, w.quit, w.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go w.run()
}

// add queues a write and reports whether it was queued; false means the
// queue is full or stopped and the caller decides what to do instead.
func (w *lazyWriter) add(lw lazyWrite) bool {
	w.mu.Lock()
	if w.closed || len(w.queue) >= w.max {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, lw)
	first := len(w.queue) == 1
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default: // already signalled
		}
	}
	return true
}

// stop refuses further writes, sends what is queued and waits for it.
func (w *lazyWriter) stop() {
	w.mu.Lock()
	stopped := w.closed
	w.closed = true
	w.mu.Unlock()
	if !stopped {
		close(w.quit)
	}
	<-w.done
}

func (w *lazyWriter) run() {
	defer close(w.done)
	var batch []lazyWrite
	var members []any
	for {
		var last bool
		select {
		case <-w.wake:
		case <-w.quit:
			last = true
		}
		w.mu.Lock()
		batch, w.queue = w.queue, batch[:0]
		w.mu.Unlock()
		members = w.flush(batch, members)
		clear(batch) // let the strings go
		if last {
			return
		}
	}
}

// flush sends batch as one pipeline: one ZREM per key with all its
// members, one DEL per key (a Cluster cannot DEL keys of different slots
// in one command; go-redis splits the pipeline by node). Errors are
// logged: every lazy write may be lost. It returns members for reuse.
func (w *lazyWriter) flush(batch []lazyWrite, members []any) []any {
	if len(batch) == 0 {
		return members
	}
	slices.SortFunc(batch, func(a, b lazyWrite) int { return strings.Compare(a.key, b.key) })
	ctx, cancel := context.WithTimeout(context.Background(), lazyTimeout)
	defer cancel()
	p := w.e.client.Pipeline()
	for i := 0; i < len(batch); {
		if batch[i].del {
			p.Del(ctx, batch[i].key)
			i++
			continue
		}
		members = members[:0]
		j := i
		for ; j < len(batch) && !batch[j].del && batch[j].key == batch[i].key; j++ {
			members = append(members, batch[j].member)
		}
		p.ZRem(ctx, batch[i].key, members...)
		i = j
	}
	clear(members)
	if _, err := p.Exec(ctx); err != nil {
		w.e.logger.Warn("lazy writes lost", "writes", len(batch), "err", err)
	}
	return members
}

// Unconfirmed returns up to limit active reservations recorded at or before
// olderThan whose publish was never confirmed, oldest first, across every
// sale this prefix has loaded (the sales set, never KEYS or SCAN).
func (e *Engine) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	if limit <= 0 {
		return nil, nil
	}
	sales, err := e.sales(ctx)
	if err != nil {
		return nil, unavailable("unconfirmed", err)
	}
	if len(sales) == 0 {
		return nil, nil
	}
	by := &goredis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(olderThan.UnixMilli(), 10), Count: int64(limit)}
	ranges := make([]*goredis.ZSliceCmd, len(sales))
	if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, s := range sales {
			ranges[i] = p.ZRangeByScoreWithScores(ctx, e.saleKeys(s).unconfirmed, by)
		}
		return nil
	}); err != nil {
		return nil, unavailable("unconfirmed", err)
	}
	type pending struct {
		sale, order string
		at          float64
	}
	var ps []pending
	for i, c := range ranges {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			ps = append(ps, pending{sales[i], id, z.Score})
		}
	}
	slices.SortFunc(ps, func(a, b pending) int { return cmp.Compare(a.at, b.at) })
	ps = ps[:min(len(ps), limit)]
	if len(ps) == 0 {
		return nil, nil
	}
	recs := make([]*goredis.StringCmd, len(ps))
	if _, err := e.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, x := range ps {
			recs[i] = p.HGet(ctx, e.saleKeys(x.sale).res, x.order)
		}
		return nil
	}); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, unavailable("unconfirmed", err)
	}
	out := make([]flashsale.Reservation, 0, len(ps))
	for i, x := range ps {
		v, err := recs[i].Result()
		if err != nil {
			continue // the record expired or the sale was reloaded
		}
		r, err := parseRecord(x.sale, x.order, v)
		if err != nil {
			e.logger.WarnContext(ctx, "unconfirmed: skip bad record", "sale_id", x.sale, "order_id", x.order, "err", err)
			continue
		}
		if r.Active {
			out = append(out, *r)
		}
	}
	return out, nil
}
