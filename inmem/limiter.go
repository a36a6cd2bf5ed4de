package inmem

import (
	"context"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/maypok86/otter/v2"
	"golang.org/x/time/rate"
)

// Limiter is a flashsale.Limiter that counts in this process: a token
// bucket (golang.org/x/time/rate) per key, kept in a bounded cache that
// forgets a key idle for a minute (an idle bucket is full again by then,
// at any rate worth limiting).
type Limiter struct {
	buckets *otter.Cache[string, *bucket]
	now     func() time.Time
}

// bucket never shows its rate.Limiter time going back. rate.Limiter takes
// the time from its caller and, granting at a time earlier than its last,
// sets its clock back, so the interval between is counted again: callers
// that read the clock, then waited for the limiter's lock (128 on one
// sale's key on a loaded CI machine), granted 299 where 221 were allowed.
// The clock is read under the bucket's lock and never before its last.
type bucket struct {
	mu   sync.Mutex
	lim  *rate.Limiter
	last time.Time
}

var _ flashsale.Limiter = (*Limiter)(nil)

// limiterKeys bounds the keys remembered: users and addresses of a flash
// sale's minute. Past it the least useful buckets go, which only forgives.
const limiterKeys = 1 << 20

// NewLimiter returns an empty Limiter.
func NewLimiter() *Limiter {
	return newLimiter(time.Now)
}

func newLimiter(now func() time.Time) *Limiter {
	return &Limiter{now: now, buckets: otter.Must(&otter.Options[string, *bucket]{
		MaximumSize:      limiterKeys,
		ExpiryCalculator: otter.ExpiryAccessing[string, *bucket](time.Minute),
	})}
}

// Allow implements flashsale.Limiter. A key's bucket is made with the
// first Rate it is asked with and keeps its tokens when asked with
// another: the new rate and burst apply from then on.
func (l *Limiter) Allow(_ context.Context, key string, r flashsale.Rate) (bool, time.Duration, error) {
	if r.Off() {
		return true, 0, nil
	}
	limit, burst := rate.Every(r.Every()), max(r.Burst, 1)
	b, ok := l.buckets.GetIfPresent(key)
	if !ok {
		b, _ = l.buckets.SetIfAbsent(key, &bucket{lim: rate.NewLimiter(limit, burst)})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := l.now()
	if now.Before(b.last) {
		now = b.last
	}
	b.last = now
	if b.lim.Limit() != limit || b.lim.Burst() != burst {
		b.lim.SetLimitAt(now, limit)
		b.lim.SetBurstAt(now, burst)
	}
	if b.lim.AllowN(now, 1) {
		return true, 0, nil
	}
	// Refused without taking anything: the next token is this far away.
	missing := 1 - b.lim.TokensAt(now)
	return false, time.Duration(missing / float64(b.lim.Limit()) * float64(time.Second)), nil
}

// Close stops the cache's cleanup goroutine.
func (l *Limiter) Close() error {
	l.buckets.StopAllGoroutines()
	return nil
}
