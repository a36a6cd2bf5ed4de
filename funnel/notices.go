package funnel

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Delivering the outbox of order events (notice.go in the root). The
// database wrote each notice in the transaction of its change; here one
// dispatcher per transport and deployment (whichever instance holds the
// transport's lease in the database) delivers them, one order's in Seq
// order, retrying a notice that fails with a capped exponential backoff
// until its receiver has it, and moves the cursor only past notices
// delivered. So a receiver sees every notice at least once and one
// order's notices in order; a crash between a delivery and its ack
// delivers that notice again, which the receiver drops by its ID.

// dispatcher delivers the outbox's order events: one loop per sink, and
// the outbox's pruning (prune.go). It owns those goroutines: run starts
// them and returns once they have all ended.
type dispatcher struct {
	store    flashsale.NoticeStore
	sales    *catalog // marks a test sale's events
	log      *slog.Logger
	now      func() time.Time
	instance string // the lease holder's name
	sinks    []flashsale.NoticeSink
	// poll is how often an idle loop looks again; retention is how long
	// the outbox keeps what every transport has (zero: for ever).
	poll, retention time.Duration
}

// run delivers and prunes until ctx ends, then returns once every loop has.
func (d *dispatcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sink := range d.sinks {
		wg.Go(func() { d.deliver(ctx, sink) })
	}
	if d.retention > 0 {
		wg.Go(func() { d.prune(ctx) })
	}
	wg.Wait()
}

// Dispatch defaults.
const (
	// NoticePollDefault is how often an idle dispatcher looks for new
	// notices: with the reaper's 100 ms it keeps a hold's expiry event
	// well within a second of the expiry.
	NoticePollDefault = 100 * time.Millisecond
	// NoticeLease is how long a claim keeps other instances off a
	// transport; each batch renews it, and one batch takes about one
	// deliverTimeout at most (a failure stops the batch). An instance
	// that stops gives its lease back; one that crashes holds it this
	// long, so after a crash the events wait up to NoticeLease for
	// another instance (or the restarted one) to take over.
	NoticeLease = 10 * time.Second
	// noticeBatch is the most notices one claim returns.
	noticeBatch = 100
	// deliverTimeout bounds one delivery.
	deliverTimeout = 3 * time.Second
	// noticeBackoffMin and noticeBackoffMax bound the wait before a failed
	// notice is tried again.
	noticeBackoffMin = 200 * time.Millisecond
	noticeBackoffMax = 30 * time.Second
)

// Deliveries reads the delivery log.
func (s *Service) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	return s.store.Deliveries(ctx, q)
}

// NoticeStatus says, per configured transport, how far its delivery is.
func (s *Service) NoticeStatus(ctx context.Context) ([]flashsale.NoticeTransport, error) {
	out := make([]flashsale.NoticeTransport, 0, len(s.events.sinks))
	for _, sink := range s.events.sinks {
		cursor, last, err := s.store.NoticeCursor(ctx, sink.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, flashsale.NoticeTransport{Name: sink.Name(), Cursor: cursor, Last: last, Behind: last - cursor})
	}
	return out, nil
}

// deliver delivers sink's notices until ctx ends. A claimed batch
// is delivered noticeWorkers orders at a time, each order's notices one
// after the other, so a flash sale's thousands of expiries leave in
// parallel while one order's events keep their order; the cursor then
// moves past the longest run of delivered notices from its start, and
// whatever follows a failure is delivered again after the backoff (at
// least once).
func (d *dispatcher) deliver(ctx context.Context, sink flashsale.NoticeSink) {
	name := sink.Name()
	defer func() {
		// Give the lease back, so the next instance need not wait it out:
		// a claim until now, of nothing, ends it if it is still this one's.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, _, err := d.store.ClaimNotices(ctx, name, d.instance, time.Now(), 0); err != nil {
			d.log.Warn("events: lease not given back", "transport", name, "err", err)
		}
	}()
	backoff := time.Duration(0)
	attempts := map[string]int{} // tries per notice ID, for the log
	wait := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	for ctx.Err() == nil {
		cursor, last, err := d.store.NoticeCursor(ctx, name)
		if err == nil && cursor >= last {
			wait(d.poll) // nothing new: no claim, no write
			continue
		}
		ns, ok, err := d.store.ClaimNotices(ctx, name, d.instance, time.Now().Add(NoticeLease), noticeBatch)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				d.log.Warn("events: claim failed", "transport", name, "err", err)
			}
			wait(time.Second)
			continue
		case !ok:
			wait(NoticeLease / 4) // another instance delivers
			continue
		case len(ns) == 0:
			wait(d.poll)
			continue
		}
		results := d.deliverBatch(ctx, sink, ns, attempts)
		for i, n := range ns {
			if results[i] != errNotTried {
				attempts[n.ID]++
			}
		}
		done := 0
		for done < len(ns) && results[done] == nil {
			delete(attempts, ns[done].ID)
			done++
		}
		if done > 0 {
			if err := d.store.AckNotices(ctx, name, d.instance, ns[done-1].Seq); err != nil &&
				!errors.Is(err, flashsale.ErrStale) && ctx.Err() == nil {
				d.log.Warn("events: ack failed", "transport", name, "seq", ns[done-1].Seq, "err", err)
			}
		}
		if done == len(ns) {
			backoff = 0
			continue
		}
		n := ns[done]
		backoff = min(max(2*backoff, noticeBackoffMin), noticeBackoffMax)
		d.log.Warn("events: delivery failed; retrying", "transport", name, "event_id", n.ID,
			"attempt", attempts[n.ID], "retry_in", backoff, "err", results[done])
		wait(backoff/2 + rand.N(backoff/2+1))
	}
}

// noticeWorkers is how many orders' notices one batch delivers at once.
const noticeWorkers = 16

// deliverBatch delivers ns, grouped by order, and returns each notice's
// outcome: nil delivered, else the error (or errNotTried after an earlier
// notice of its order, or any notice once the receiver failed). attempts
// holds the tries so far per notice ID; the caller counts this batch's.
// The batch's attempts go to the delivery log in one write at its end.
func (d *dispatcher) deliverBatch(ctx context.Context, sink flashsale.NoticeSink, ns []flashsale.Notice, attempts map[string]int) []error {
	results := make([]error, len(ns))
	logged := make([]flashsale.Delivery, len(ns)) // zero where not tried
	groups := map[string][]int{}
	var keys []string
	for i, n := range ns {
		if _, ok := groups[n.OrderID]; !ok {
			keys = append(keys, n.OrderID)
		}
		groups[n.OrderID] = append(groups[n.OrderID], i)
	}
	tries := make([]int, len(ns)) // this try's number, for the log
	for i, n := range ns {
		tries[i] = attempts[n.ID] + 1
	}
	work := make(chan []int)
	var wg sync.WaitGroup
	// After a failure no more orders are started: a receiver that is down
	// costs one round of timeouts, not one per order of the batch.
	var anyFailed atomic.Bool
	for range min(noticeWorkers, len(keys)) {
		wg.Go(func() {
			for idx := range work {
				failed := anyFailed.Load()
				for _, i := range idx {
					if failed {
						results[i] = errNotTried
						continue
					}
					n := ns[i]
					if sale, err := d.sales.get(ctx, n.SaleID); err == nil {
						n.Test = sale.Test
					}
					logged[i], results[i] = d.deliverOne(ctx, sink, n, tries[i])
					if failed = results[i] != nil; failed {
						anyFailed.Store(true)
					}
				}
			}
		})
	}
	for _, k := range keys {
		work <- groups[k]
	}
	close(work)
	wg.Wait()
	tried := slices.DeleteFunc(logged, func(l flashsale.Delivery) bool { return l.Transport == "" })
	if err := d.store.RecordDeliveries(ctx, tried); err != nil && ctx.Err() == nil {
		d.log.Warn("events: delivery log not written", "transport", sink.Name(), "attempts", len(tried), "err", err)
	}
	return results
}

var errNotTried = errors.New("not tried: an earlier event of its order is not delivered yet")

// deliverOne delivers one notice and returns the attempt, for the log, and
// its outcome.
func (d *dispatcher) deliverOne(ctx context.Context, sink flashsale.NoticeSink, n flashsale.Notice, attempt int) (flashsale.Delivery, error) {
	dctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	start := time.Now()
	status, err := sink.Deliver(dctx, n)
	cancel()
	rec := flashsale.Delivery{Transport: sink.Name(), NoticeID: n.ID, Seq: n.Seq, Type: n.Type, Attempt: attempt,
		At: start.UTC(), OK: err == nil, Status: status, Took: time.Since(start)}
	if err != nil {
		rec.Error = err.Error()
	}
	return rec, err
}
