package flashsale

import (
	"context"
	"time"
)

// Rate is a limit on how often one key may act: Burst at once, refilled
// at PerSecond. A zero Rate is no limit.
type Rate struct {
	PerSecond int
	Burst     int
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.PerSecond <= 0 }

// Limiter decides whether one more request under a key fits its rate. The
// in-process one (inmem) counts in this process; the Redis one counts for
// every instance that shares the Redis, so a scalper cannot multiply his
// allowance by the number of instances behind the load balancer.
type Limiter interface {
	// Allow takes one request from key's allowance. When it does not fit,
	// ok is false and retryAfter says when the next one will.
	Allow(ctx context.Context, key string, r Rate) (ok bool, retryAfter time.Duration, err error)
}

// RateLimitedError is a request refused by a limit, with when to retry: the
// HTTP layer answers 429 rate_limited with that Retry-After.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return ErrRateLimited.Error() }

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }
