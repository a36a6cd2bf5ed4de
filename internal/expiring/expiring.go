// Package expiring is a map whose entries each carry an expiry and that
// gives its memory back while nobody uses it.
//
// It exists for the caches a purchase fills (verified JWTs, spent purchase
// tokens): swept only as new entries came, they held a finished sale's
// guests until the next sale, 79 MB of a 2 MB server (issue 26). A Go map
// never shrinks, so a sweep that leaves it much smaller than it was builds
// a new one.
package expiring

import (
	"sync"
	"time"
)

// minSweep is the size below which a write never sweeps: a small map
// costs nothing to keep until the timer comes.
const minSweep = 1024

// Map maps keys to values until their expiry. Expired entries are never
// returned; they are swept when the map has doubled since its last sweep
// (so a storm's memory stays within about twice its live entries, the
// sweep's cost amortised over the writes that grew it) and by a timer
// every Config.Idle while the map holds anything (so an idle map
// empties). The timer is armed only while entries remain: an empty Map
// holds no timer and needs no closing.
type Map[K comparable, V any] struct {
	now  func() time.Time
	idle time.Duration
	max  int

	mu        sync.RWMutex
	m         map[K]entry[V]
	nextSweep int         // len at which a write sweeps
	peak      int         // the largest len since m was made
	timer     *time.Timer // the idle sweep, nil when not armed
}

type entry[V any] struct {
	v   V
	exp time.Time
}

// Config configures a Map.
type Config struct {
	// Idle is how often a non-empty map is swept by its timer.
	Idle time.Duration
	// Max bounds the entries: a write to a full map empties it first.
	// Zero is no bound, for sets that must not forget a live entry (a
	// spent token forgotten could be spent twice).
	Max int
	// Now is the clock expiries are judged by; nil is time.Now. The
	// timer itself runs on real time.
	Now func() time.Time
}

// New returns an empty Map.
func New[K comparable, V any](cfg Config) *Map[K, V] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Map[K, V]{now: cfg.Now, idle: cfg.Idle, max: cfg.Max, m: make(map[K]entry[V]), nextSweep: minSweep}
}

// Get returns k's value if it is there and has not expired.
func (m *Map[K, V]) Get(k K) (V, bool) {
	now := m.now()
	m.mu.RLock()
	e, ok := m.m[k]
	m.mu.RUnlock()
	if !ok || !now.Before(e.exp) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Set maps k to v until exp.
func (m *Map[K, V]) Set(k K, v V, exp time.Time) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.put(k, entry[V]{v, exp}, now)
}

// Add maps k to v until exp unless k is there and has not expired, and
// reports whether it did: of concurrent Adds of one key, one wins.
func (m *Map[K, V]) Add(k K, v V, exp time.Time) bool {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[k]; ok && now.Before(e.exp) {
		return false
	}
	m.put(k, entry[V]{v, exp}, now)
	return true
}

// Len is the number of entries held, expired or not.
func (m *Map[K, V]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}

// put stores e under k. The caller holds mu.
func (m *Map[K, V]) put(k K, e entry[V], now time.Time) {
	if m.max > 0 && len(m.m) >= m.max {
		m.m = make(map[K]entry[V])
		m.peak, m.nextSweep = 0, minSweep
	}
	m.m[k] = e
	m.peak = max(m.peak, len(m.m))
	if len(m.m) >= m.nextSweep {
		m.sweep(now)
	}
	if m.timer == nil && m.idle > 0 {
		m.timer = time.AfterFunc(m.idle, m.onTimer)
	}
}

// onTimer is the idle sweep: it rearms itself while entries remain.
func (m *Map[K, V]) onTimer() {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	if len(m.m) == 0 {
		m.timer = nil
		return
	}
	m.timer.Reset(m.idle)
}

// sweep deletes the expired entries, and builds a new map when fewer than
// half the peak's entries are left: deleting frees no memory of a Go map.
// The caller holds mu.
func (m *Map[K, V]) sweep(now time.Time) {
	for k, e := range m.m {
		if !now.Before(e.exp) {
			delete(m.m, k)
		}
	}
	if len(m.m) < m.peak/2 {
		fresh := make(map[K]entry[V], len(m.m))
		for k, e := range m.m {
			fresh[k] = e
		}
		m.m = fresh
		m.peak = len(fresh)
	}
	m.nextSweep = max(2*len(m.m), minSweep)
}
