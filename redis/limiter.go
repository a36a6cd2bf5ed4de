package redis

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/go-redis/redis_rate/v10"
)

// Limiter is a flashsale.Limiter every instance on the Redis shares: GCRA
// (go-redis/redis_rate) on one key per limited thing, so N instances behind
// a load balancer allow a key its rate once, not N times. While Redis does
// not answer it counts in this process instead (Local), with a log line:
// limits that hold per instance beat no limits, and a purchase refused for
// a limiter's sake while Redis is down would be refused twice.
type Limiter struct {
	gcra   *redis_rate.Limiter
	prefix string
	local  flashsale.Limiter
	log    *slog.Logger
	// Down, when set, reports that Redis is known not to answer (the
	// breaker in front of the engine is open): the limiter then counts
	// locally at once rather than wait out the Redis timeout on every
	// purchase.
	Down func() bool
	// localSince is when the fallback began (unix ns), 0 while on Redis.
	localSince atomic.Int64
}

var _ flashsale.Limiter = (*Limiter)(nil)

// Limiter returns a limiter on the engine's Redis, its keys under the
// engine's prefix, falling back to local.
func (e *Engine) Limiter(local flashsale.Limiter) *Limiter {
	return &Limiter{gcra: redis_rate.NewLimiter(e.client), prefix: e.prefix + "rate:", local: local, log: e.logger}
}

// Allow implements flashsale.Limiter.
func (l *Limiter) Allow(ctx context.Context, key string, r flashsale.Rate) (bool, time.Duration, error) {
	if r.Off() {
		return true, 0, nil
	}
	if l.Down != nil && l.Down() {
		return l.local.Allow(ctx, key, r)
	}
	res, err := l.gcra.Allow(ctx, l.prefix+key, redis_rate.Limit{Rate: r.N, Burst: max(r.Burst, 1), Period: r.Per})
	if err != nil {
		if l.localSince.CompareAndSwap(0, time.Now().UnixNano()) {
			l.log.Warn("rate limits: Redis does not answer; counting in this instance until it does", "err", err)
		}
		return l.local.Allow(ctx, key, r)
	}
	if since := l.localSince.Swap(0); since != 0 {
		l.log.Warn("rate limits: back on Redis", "local_for", time.Since(time.Unix(0, since)).Round(time.Millisecond))
	}
	if res.Allowed == 0 {
		return false, res.RetryAfter, nil
	}
	return true, 0, nil
}
