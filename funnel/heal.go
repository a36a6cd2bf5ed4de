package funnel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/oklog/ulid/v2"
)

// Healing: when the stock engine loses a live sale's state (Redis restarted
// without persistence, flushed, failed over to an empty replica), the sale
// is rebuilt from the database without an operator or a restart.
//
// The database is the truth, but not all of it yet: orders a guest got a
// 202 for may still be in the queue (or in the consumers' hands), and
// loading the database as it is would hand their rooms out again. So the
// rebuild drains first, fenced across instances:
//
//  1. One instance takes the lease (Fence.Lead); the others see it on their
//     next tick and pause their queue consumers (Drainer.Pause writes and
//     acknowledges everything they hold, then takes nothing more).
//  2. The leader waits HealGrace, so publishes that began before the loss
//     are confirmed or given up, then until every live instance reports
//     paused for this epoch.
//  3. The leader's consumer drains the queue alone (Drainer.Drain): every
//     message that was in it is then in the database.
//  4. The leader reads each lost sale's snapshot and loads it, then ends
//     the lease; every consumer resumes.
//
// While a sale is not loaded its purchases are 503 with Retry-After, never
// a wrong answer; the engine refuses them because the sale is not there.
// Two leaders cannot run at once (the lease), and no unit is counted twice
// (nothing of the sale is in flight while its snapshot is read).

// Fence coordinates a rebuild across the instances that share an engine.
// The Redis engine implements it (redis/fence.go).
type Fence interface {
	// Lead takes the lease for epoch if nobody holds it.
	Lead(ctx context.Context, epoch string, lease time.Duration) (bool, error)
	// Extend renews epoch's lease; false if it was lost.
	Extend(ctx context.Context, epoch string, lease time.Duration) (bool, error)
	// End releases epoch's lease.
	End(ctx context.Context, epoch string) error
	// Healing returns the epoch in progress, or "".
	Healing(ctx context.Context) (string, error)
	// Beat records this instance as alive, with the epoch its consumer is
	// paused for ("" while it consumes).
	Beat(ctx context.Context, instance, paused string) error
	// Paused lists the live instances not yet paused for epoch.
	Paused(ctx context.Context, epoch string) ([]string, error)
	// Unload closes a loaded sale in the engine until it is loaded again.
	Unload(ctx context.Context, saleID string) error
}

// Drainer is this instance's order-queue consumer, as the rebuild needs it.
type Drainer interface {
	// Pause returns once the consumer holds nothing and takes nothing more.
	Pause(ctx context.Context) error
	// Resume undoes Pause.
	Resume()
	// Drain consumes alone until the queue is empty, then pauses.
	Drain(ctx context.Context) error
	// Backlog is the number of messages waiting in the queue, for the
	// audit: while any wait, an order without its row may be one of them.
	Backlog(ctx context.Context) (int, error)
}

// nopDrainer is the Drainer of an order path with nothing in flight: the
// group-commit writer answers a purchase only once its order is committed.
type nopDrainer struct{}

func (nopDrainer) Pause(context.Context) error { return nil }
func (nopDrainer) Resume()                     {}
func (nopDrainer) Drain(context.Context) error { return nil }

func (nopDrainer) Backlog(context.Context) (int, error) { return 0, nil }

// Defaults of healing.
const (
	HealGraceDefault = 5 * time.Second
	healTick         = 250 * time.Millisecond
	healLease        = 15 * time.Second
	// healWait bounds how long a leader waits for the others to pause:
	// an instance that cannot (its database is down too) makes the
	// rebuild give up and try again later, rather than load a sale with
	// orders still in flight.
	healWait = 30 * time.Second
	// healTimeout bounds one whole rebuild.
	healTimeout = 2 * time.Minute
)

// healer rebuilds lost sales on this instance: fenced across the
// instances that share the engine (run, heal), or, in the embedded shape
// (nil fence), in process behind the engineWork barrier (rebuild). It
// owns its lock and its goroutines (run: the heal loop and its heartbeat).
type healer struct {
	*parts
	sales      *catalog
	work       *inflight   // the Service's engineWork
	engineMode func() bool // whether the deployment sells from the engine

	fence   Fence
	drainer Drainer
	grace   time.Duration
	wake    chan struct{} // capacity 1
	// mu serialises rebuilds in this process and the pausing and resuming
	// of its consumer. Lock order: locks.txt.
	mu sync.Mutex
	// pausedFor is the epoch this instance's consumer is paused for (a
	// string, "" while it consumes); mu's holder writes it, the heartbeat
	// goroutine reads it.
	pausedFor atomic.Value
}

// errHealBusy means another instance leads a rebuild.
var errHealBusy = errors.New("a rebuild is already in progress")

// wakeHeal asks the heal loop to look now (a purchase met ErrNotLoaded).
func (h *healer) wakeHeal() {
	if h.fence == nil {
		return
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run is every instance's part in healing until ctx ends: follow a
// rebuild in progress (pause and resume the consumer), beat, and lead one
// when a live sale is missing from the engine. It returns once its
// heartbeat has too.
func (h *healer) run(ctx context.Context) {
	var beat sync.WaitGroup
	beat.Go(func() { h.beatLoop(ctx) })
	every(ctx, healTick, h.wake, h.healStep)
	beat.Wait()
}

func (h *healer) healStep(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	epoch, err := h.fence.Healing(ctx)
	if err != nil {
		return // the engine is down: nothing to follow, nothing to rebuild yet
	}
	switch {
	case epoch != "" && h.paused() != epoch:
		pctx, cancel := context.WithTimeout(ctx, healWait)
		err := h.drainer.Pause(pctx)
		cancel()
		if err != nil {
			h.log.Error("rebuild: pause the order consumer", "epoch", epoch, "err", err)
			return
		}
		h.setPaused(epoch)
		h.log.Info("rebuild in progress elsewhere: order consumer paused", "epoch", epoch)
	case epoch == "" && h.paused() != "":
		h.drainer.Resume()
		h.setPaused("")
		h.log.Info("rebuild over: order consumer resumed")
	}
	if epoch != "" {
		return
	}
	lost, err := h.lostSales(ctx)
	if err != nil || len(lost) == 0 || !h.engineMode() {
		return // (in db mode the return to the engine rebuilds it)
	}
	if err := h.heal(ctx, lost, nil); err != nil && !errors.Is(err, errHealBusy) {
		h.log.Error("rebuild failed; retrying", "err", err)
	}
}

// rebuilding reports whether the engine has lost a live sale or a rebuild
// is in progress (or the fence cannot say): then an order missing from the
// engine and the database may still be in the queue.
func (h *healer) rebuilding(ctx context.Context) bool {
	if h.fence == nil {
		return false
	}
	epoch, err := h.fence.Healing(ctx)
	if err != nil || epoch != "" {
		return true
	}
	lost, err := h.lostSales(ctx)
	if len(lost) > 0 {
		h.wakeHeal()
	}
	return err != nil || len(lost) > 0
}

// beatLoop keeps this instance's heartbeat going on its own, so an instance
// busy pausing its consumer (writing a prefetch's worth of orders) is never
// taken for dead by a leader, which would then load a snapshot while this
// instance still writes.
func (h *healer) beatLoop(ctx context.Context) {
	every(ctx, healTick, nil, func(ctx context.Context) {
		if err := h.fence.Beat(ctx, h.instance, h.paused()); err != nil {
			h.log.Debug("fence heartbeat", "err", err)
		}
	})
}

// setPaused records the epoch this instance's consumer is paused for.
// The caller holds healing.mu.
func (h *healer) setPaused(epoch string) { h.pausedFor.Store(epoch) }

// paused is the epoch this instance's consumer is paused for, or "".
func (h *healer) paused() string {
	epoch, _ := h.pausedFor.Load().(string)
	return epoch
}

// lostSales are the cached sales that have not ended and that the engine
// does not have, asked in one call: the loop asks every tick, and one
// Available per live sale made an idle instance's cost grow with the
// sales nobody buys (issue 26: 30% of a core at 1 000 sales).
func (h *healer) lostSales(ctx context.Context) ([]string, error) {
	live := h.sales.live()
	if len(live) == 0 {
		return nil, nil
	}
	return h.engine.Missing(ctx, live)
}

// rebuild reinstalls one sale from the database even though the engine has
// it (the audit found its units drifted): the sale is closed everywhere
// while the queue drains, then loaded again.
func (h *healer) rebuild(ctx context.Context, saleID string) error {
	if h.fence == nil {
		// The in-process engine: a purchase's units are in flight from its
		// reserve until its group commit answers, and a payment's from the
		// engine's retake to the database's; engineWork waits for those to
		// end and holds new ones back while the snapshot is read and loaded
		// (milliseconds), so no unit is counted twice or lost.
		sale, err := h.sales.get(ctx, saleID)
		if err != nil {
			return err
		}
		h.work.hold()
		defer h.work.release()
		return h.loadAt(ctx, sale, time.Time{})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heal(ctx, nil, []string{saleID})
}

// heal leads one fenced rebuild of the lost sales (missing from the engine)
// and the forced ones (loaded, but to be replaced). The caller holds healing.mu.
func (h *healer) heal(ctx context.Context, lost, forced []string) error {
	epoch := ulid.Make().String()
	ok, err := h.fence.Lead(ctx, epoch, healLease)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	if !ok {
		return errHealBusy
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, healTimeout)
	defer cancel()
	leaseLost := make(chan struct{})
	go h.keepLease(ctx, epoch, cancel, leaseLost)
	defer func() {
		cancel()
		<-leaseLost
		if err := h.fence.End(context.WithoutCancel(ctx), epoch); err != nil {
			h.log.Error("rebuild: end the lease", "epoch", epoch, "err", err)
		}
		h.drainer.Resume()
		h.setPaused("")
	}()
	h.log.Warn("rebuilding the stock engine from the database", "epoch", epoch, "lost_sales", lost, "forced_sales", forced)
	for _, id := range forced {
		if err := h.fence.Unload(ctx, id); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
	}

	if err := h.drainer.Pause(ctx); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	h.setPaused(epoch)
	wait := time.NewTimer(time.Until(start.Add(h.grace)))
	select {
	case <-wait.C:
	case <-ctx.Done():
		wait.Stop()
		return fmt.Errorf("rebuild: %w", ctx.Err())
	}
	for deadline := time.Now().Add(healWait); ; {
		if err := h.fence.Beat(ctx, h.instance, epoch); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		waiting, err := h.fence.Paused(ctx, epoch)
		if err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		if len(waiting) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rebuild: instances %v did not pause their consumers in %v", waiting, healWait)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("rebuild: %w", ctx.Err())
		}
	}
	if err := h.drainer.Drain(ctx); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	drained := time.Since(start)

	sales, err := h.store.Sales(ctx, h.now())
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	loaded := 0
	for _, sale := range sales {
		_, err := h.engine.Available(ctx, sale.ID)
		switch {
		case errors.Is(err, flashsale.ErrNotLoaded):
		case err != nil:
			return fmt.Errorf("rebuild: %w", err)
		default:
			continue // loaded and not forced (a forced sale was unloaded)
		}
		if err := h.loadAt(ctx, sale, time.Time{}); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		h.sales.put(sale)
		loaded++
	}
	h.log.Warn("stock engine rebuilt from the database", "epoch", epoch, "sales", loaded,
		"drained_in", drained.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// keepLease renews the lease until ctx ends, and cancels the rebuild if
// the lease was lost (another leader may start: this one must stop).
func (h *healer) keepLease(ctx context.Context, epoch string, cancel context.CancelFunc, done chan<- struct{}) {
	defer close(done)
	every(ctx, healLease/5, nil, func(ctx context.Context) {
		if ok, err := h.fence.Extend(ctx, epoch, healLease); err == nil && !ok {
			h.log.Error("rebuild: lease lost; stopping", "epoch", epoch)
			cancel()
		}
	})
}
