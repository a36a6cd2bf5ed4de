package funnel

import "sync"

// inflight is the one barrier between work that has taken units from a
// source of stock and not yet answered (a purchase from its reserve to its
// answer, a payment's retake, an operator's stock change), and a step that
// must see none of that work in flight: an in-process rebuild, or a step
// of the sell mode away from that source. The work enters and leaves it
// (many at once); the step waits for it to empty, or holds it empty while
// it works.
//
// The Service has two: engineWork for the stock engine, and the seller's
// dbWork for purchases from the database in db mode (mode.go). Lock
// order: locks.txt.
type inflight struct{ mu sync.RWMutex }

// enter marks one piece of work in flight until leave. (Separate
// methods, not a returned func: a method value would cost a purchase an
// allocation.)
func (b *inflight) enter() { b.mu.RLock() }

// leave ends what enter began.
func (b *inflight) leave() { b.mu.RUnlock() }

// hold waits for the work in flight to end and keeps new work out until
// release.
func (b *inflight) hold() { b.mu.Lock() }

// release ends what hold began.
func (b *inflight) release() { b.mu.Unlock() }

// wait returns once the work in flight when it was called has ended; the
// caller has already made sure new work will not start (it changed what
// the work checks after entering).
func (b *inflight) wait() {
	b.hold()
	b.release()
}
