package inmem

import (
	"context"
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
	buckets *otter.Cache[string, *rate.Limiter]
}

var _ flashsale.Limiter = (*Limiter)(nil)

// limiterKeys bounds the keys remembered: users and addresses of a flash
// sale's minute. Past it the least useful buckets go, which only forgives.
const limiterKeys = 1 << 20

// NewLimiter returns an empty Limiter.
func NewLimiter() *Limiter {
	return &Limiter{buckets: otter.Must(&otter.Options[string, *rate.Limiter]{
		MaximumSize:      limiterKeys,
		ExpiryCalculator: otter.ExpiryAccessing[string, *rate.Limiter](time.Minute),
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
		b, _ = l.buckets.SetIfAbsent(key, rate.NewLimiter(limit, burst))
	}
	now := time.Now()
	if b.Limit() != limit || b.Burst() != burst {
		b.SetLimitAt(now, limit)
		b.SetBurstAt(now, burst)
	}
	if b.AllowN(now, 1) {
		return true, 0, nil
	}
	// Refused without taking anything: the next token is this far away.
	missing := 1 - b.TokensAt(now)
	return false, time.Duration(missing / float64(b.Limit()) * float64(time.Second)), nil
}

// Close stops the cache's cleanup goroutine.
func (l *Limiter) Close() error {
	l.buckets.StopAllGoroutines()
	return nil
}
