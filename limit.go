package flashsale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Rate is a limit on how often one key may act: N per Per, Burst at once.
// A zero Rate is no limit.
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// PerSecond is n a second, with a burst of burst.
func PerSecond(n, burst int) Rate { return Rate{N: n, Per: time.Second, Burst: burst} }

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.N <= 0 || r.Per <= 0 }

// String writes r as its configuration does: "20/s,40", or "off".
func (r Rate) String() string {
	if r.Off() {
		return "off"
	}
	unit, ok := rateUnitOf(r.Per)
	if !ok {
		unit = r.Per.String()
	}
	return strconv.Itoa(r.N) + "/" + unit + "," + strconv.Itoa(r.Burst)
}

// MarshalText writes r as String does, so a sale's limits read back as
// they were configured.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// rateUnits are the periods a Rate is written in.
var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

func rateUnitOf(per time.Duration) (string, bool) {
	for u, d := range rateUnits {
		if d == per {
			return u, true
		}
	}
	return "", false
}

// MaxRate bounds a Rate's count and burst: more is a typo, not a limit.
const MaxRate = 1_000_000

// ParseRate reads a Rate as the configuration and a sale's limits write
// it: "N/s", "N/m" or "N/h", optionally ",BURST" (default N), or "off".
// It is the one parser of that form, so an environment variable and a
// sale's JSON cannot disagree on what "20/s,40" means.
func ParseRate(v string) (Rate, error) {
	if v == "off" {
		return Rate{}, nil
	}
	spec, burst, hasBurst := strings.Cut(v, ",")
	n, unit, ok := strings.Cut(spec, "/")
	per := rateUnits[unit]
	count, err := strconv.Atoi(n)
	if !ok || per == 0 || err != nil || count <= 0 || count > MaxRate {
		return Rate{}, fmt.Errorf("%q: want N/s, N/m or N/h with N from 1 to %d, optionally ,BURST, or off", v, MaxRate)
	}
	r := Rate{N: count, Per: per, Burst: count}
	if hasBurst {
		if r.Burst, err = strconv.Atoi(burst); err != nil || r.Burst <= 0 || r.Burst > MaxRate {
			return Rate{}, fmt.Errorf("%q: the burst must be an integer from 1 to %d", v, MaxRate)
		}
	}
	return r, nil
}

// Every is the time between two refills.
func (r Rate) Every() time.Duration { return r.Per / time.Duration(r.N) }

// Share is r's part for one of n instances that each count a key alone:
// n times slower and its burst n times smaller (at least one), so n such
// parts allow the key r once, not n times.
func (r Rate) Share(n int) Rate {
	if r.Off() || n <= 1 {
		return r
	}
	return Rate{N: r.N, Per: r.Per * time.Duration(n), Burst: max((r.Burst+n-1)/n, 1)}
}

// Limiter decides whether one more request under a key fits its rate. It
// counts in this process (inmem); instances behind a load balancer each
// count their share of every rate (Shared), so a scalper cannot multiply
// his allowance by the number of instances.
type Limiter interface {
	// Allow takes one request from key's allowance. When it does not fit,
	// ok is false and retryAfter says when the next one will. A key asked
	// with another Rate than before (a sale's limit edited, the instances'
	// share changed) is held to the new one from then on.
	Allow(ctx context.Context, key string, r Rate) (ok bool, retryAfter time.Duration, err error)
}

// Shared is l allowing each rate's share (Rate.Share) for one of the
// instances() that share the load: each instance counts alone, so a limit
// costs no round trip to a shared store and no key takes every request of
// a hot sale, while together the instances allow a key about its rate.
// About: exactly when the load balancer spreads a key's requests evenly;
// a balancer that pins a client to one instance holds it to one share.
// A change in the instances is felt once the count follows it (the
// heartbeats' few seconds).
func Shared(l Limiter, instances func() int) Limiter { return shared{l, instances} }

type shared struct {
	l         Limiter
	instances func() int
}

func (s shared) Allow(ctx context.Context, key string, r Rate) (bool, time.Duration, error) {
	return s.l.Allow(ctx, key, r.Share(s.instances()))
}

// RateLimitedError is a request refused by a limit, with when to retry: the
// HTTP layer answers 429 rate_limited with that Retry-After.
type RateLimitedError struct {
	Wait time.Duration
}

func (e *RateLimitedError) Error() string { return ErrRateLimited.Error() }

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// RetryAfter is how long until a retry may succeed.
func (e *RateLimitedError) RetryAfter() time.Duration { return e.Wait }

// RetryAfter finds, in err's chain, an error that knows how long until a
// retry may succeed (a limiter's refusal, an open breaker), for the
// Retry-After header; false when none does.
func RetryAfter(err error) (time.Duration, bool) {
	type waiter interface {
		error
		RetryAfter() time.Duration
	}
	if w, ok := errors.AsType[waiter](err); ok {
		return w.RetryAfter(), true
	}
	return 0, false
}

// Take takes one request from key's allowance in l, or answers a
// *RateLimitedError. A limiter that fails lets the request through (with a
// log line): both limiters answer locally when they cannot do better, so
// that is a bug's path, and refusing guests for it would be worse than not
// limiting them.
func Take(ctx context.Context, l Limiter, key string, r Rate, log *slog.Logger) error {
	ok, after, err := l.Allow(ctx, key, r)
	if err != nil {
		log.WarnContext(ctx, "rate limiter failed; request let through", "key", key, "err", err)
		return nil
	}
	if !ok {
		return &RateLimitedError{Wait: after}
	}
	return nil
}
