package inmem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

var _ flashsale.OrderWriter = (*Writer)(nil)

// Defaults for WriterConfig.
const (
	WriterMaxBatchDefault = 512
	WriterQueueDefault    = 16384
)

// WriterConfig tunes the group-commit writer. Zero values take the defaults.
type WriterConfig struct {
	// MaxBatch caps the reservations written in one transaction.
	MaxBatch int
	// Queue bounds the reservations waiting for a transaction; a Write
	// that finds it full fails fast with ErrUnavailable.
	Queue int
	// Committed, when set, is told of every transaction: how many
	// reservations it held, how long it took (the fsync included) and
	// its error (metrics).
	Committed func(orders int, took time.Duration, err error)
}

// WriterStats counts the writer's work since it started.
type WriterStats struct {
	Batches int64 // transactions attempted
	Orders  int64 // reservations handed to those transactions
	Queued  int   // reservations waiting now
}

// Writer is the embedded shape's OrderWriter: it group-commits reservations
// into the database, so a purchase is answered only once its order row is
// durable, yet thousands of purchases share a handful of transactions.
//
// One goroutine takes everything queued (up to MaxBatch) and writes it with
// a single Store.PlaceOrders. There is no timer: while one transaction
// commits, the next batch grows by itself, so batches are large exactly
// when load is high and a lone purchase waits for nobody.
//
// Lock order: mu only guards sending on queue against Close closing it; it
// is never held while waiting.
type Writer struct {
	store     flashsale.OrderStore
	logger    *slog.Logger
	maxBatch  int
	committed func(int, time.Duration, error)

	mu     sync.RWMutex
	closed bool
	queue  chan *writeRequest

	closeOnce sync.Once
	done      chan struct{}

	batches, orders atomic.Int64
}

// writeRequest is one Write waiting for its batch.
type writeRequest struct {
	r    flashsale.Reservation
	done chan writeResult // buffered: the writer never blocks on a caller
}

type writeResult struct {
	status flashsale.OrderStatus
	err    error
}

// NewWriter starts a writer over store. Close it to stop the goroutine.
func NewWriter(store flashsale.OrderStore, cfg WriterConfig, logger *slog.Logger) *Writer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = WriterMaxBatchDefault
	}
	if cfg.Queue <= 0 {
		cfg.Queue = WriterQueueDefault
	}
	if cfg.Committed == nil {
		cfg.Committed = func(int, time.Duration, error) {}
	}
	w := &Writer{
		store:     store,
		logger:    cmp.Or(logger, slog.New(slog.DiscardHandler)),
		maxBatch:  cfg.MaxBatch,
		committed: cfg.Committed,
		queue:     make(chan *writeRequest, cfg.Queue),
		done:      make(chan struct{}),
	}
	go w.run()
	return w
}

// Write queues r for the next transaction and waits for its outcome:
//
//	OrderHeld, nil          the order is committed as held (or already existed);
//	OrderFailed, err        the database refused it (ErrSoldOut, ErrLimitExceeded,
//	                        ErrKeyConflict) and recorded it as failed;
//	"", ErrUnavailable      the queue is full, the writer is closed, or the
//	                        transaction failed: nothing was written and the
//	                        caller must return the units.
//
// Once r is queued, Write waits for the transaction even if ctx is
// cancelled: the order may commit, and a caller that gave up early would
// return units the database still counts as held. A ctx already done when
// Write is called fails it with ErrUnavailable: r is never queued.
func (w *Writer) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("write order: %w: %w", flashsale.ErrUnavailable, err)
	}
	req := &writeRequest{r: *r, done: make(chan writeResult, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return "", fmt.Errorf("write order: writer closed: %w", flashsale.ErrUnavailable)
	}
	select {
	case w.queue <- req:
	default:
		w.mu.RUnlock()
		return "", flashsale.ErrUnavailable // queue full: fail fast, no allocation
	}
	w.mu.RUnlock()
	res := <-req.done
	return res.status, res.err
}

// Close stops accepting writes, writes everything already queued, and
// returns once the last batch has been answered.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		close(w.queue)
		w.mu.Unlock()
	})
	<-w.done
	return nil
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Batches: w.batches.Load(), Orders: w.orders.Load(), Queued: len(w.queue)}
}

// run is the writer goroutine: take a batch, commit it, answer, repeat
// until the queue is closed and empty.
func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*writeRequest, 0, w.maxBatch)
	rs := make([]flashsale.Reservation, 0, w.maxBatch)
	for req := range w.queue {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < w.maxBatch {
			select {
			case req, ok := <-w.queue:
				if !ok {
					break fill
				}
				batch = append(batch, req)
			default:
				break fill
			}
		}
		rs = rs[:0]
		for _, req := range batch {
			rs = append(rs, req.r)
		}
		w.commit(batch, rs)
		clear(batch) // let answered requests be collected
	}
}

// commit writes one batch and answers every request in it.
//
// The transaction runs without a deadline: abandoning it half-way would
// leave the callers unsure whether their orders committed, which is worse
// than waiting. A stuck database fills the queue, and new writes then fail
// fast with ErrUnavailable.
func (w *Writer) commit(batch []*writeRequest, rs []flashsale.Reservation) {
	w.batches.Add(1)
	w.orders.Add(int64(len(rs)))
	start := time.Now()
	errs, err := w.store.PlaceOrders(context.Background(), rs)
	w.committed(len(rs), time.Since(start), err)
	if err == nil && len(errs) != len(rs) {
		// A store bug: the transaction may have committed, so this is not
		// ErrUnavailable (the caller must not return units on a guess).
		err = fmt.Errorf("place orders: store returned %d results for %d orders", len(errs), len(rs))
		w.logger.Error("group commit returned a short result", "orders", len(rs), "results", len(errs))
		for _, req := range batch {
			req.done <- writeResult{err: err}
		}
		return
	}
	if err != nil {
		w.logger.Warn("group commit failed", "orders", len(rs), "err", err)
		err = fmt.Errorf("place orders: %w: %w", flashsale.ErrUnavailable, err)
		for _, req := range batch {
			req.done <- writeResult{err: err}
		}
		return
	}
	for i, req := range batch {
		req.done <- outcome(req.r.OrderID, errs[i])
	}
}

// outcome maps one PlaceOrders outcome to what Write returns.
func outcome(orderID string, err error) writeResult {
	switch {
	case err == nil, errors.Is(err, flashsale.ErrDuplicate):
		// A duplicate is a redelivery: the earlier order stands.
		return writeResult{status: flashsale.OrderHeld}
	case errors.Is(err, flashsale.ErrSoldOut),
		errors.Is(err, flashsale.ErrLimitExceeded),
		errors.Is(err, flashsale.ErrKeyConflict):
		return writeResult{status: flashsale.OrderFailed, err: err}
	default:
		return writeResult{err: fmt.Errorf("place order %s: %w", orderID, err)}
	}
}
