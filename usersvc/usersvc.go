// Package usersvc asks the platform's user service for the facts that
// eligibility rules need (tier, stays in the last 30 days, channel) through
// a local cache, so a user-service outage or upgrade does not stop the
// sale: the source's user centre would have blocked every purchase for 47
// minutes without one.
//
// The cache (otter) keeps a user's facts fresh for TTL (30 s): a read in
// the last RefreshAhead (5 s) of it is answered from the cache and starts
// a background refresh, so a guest who keeps buying never waits for the
// service; a read past the TTL waits for a refresh within the call
// deadline and, if the service does not answer, gets the stale value, for
// as long as StaleFor. Concurrent misses of a user are one call. With
// nothing cached and the service down, Facts answers an error wrapping
// flashsale.ErrFactsUnavailable (a 503), never a guess.
package usersvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/maypok86/otter/v2"
)

// Defaults for Config.
const (
	TTLDefault          = 30 * time.Second
	RefreshAheadDefault = 5 * time.Second
	// TimeoutDefault bounds each call: a purchase must not wait longer
	// for the user service than it takes to answer 503.
	TimeoutDefault = 300 * time.Millisecond
	// StaleForDefault is how long facts are served after the last answer
	// while the service is down: longer than the source's 47-minute
	// upgrade. Tiers and stays change slowly; a sale does not wait.
	StaleForDefault = time.Hour
	// RetryDefault is how soon a user's failed refresh is tried again,
	// and how long after a failure a stale read does not wait for one.
	RetryDefault    = 2 * time.Second
	MaxUsersDefault = 1 << 18
	// maxBody bounds the user service's answer; a real one is ~60 bytes.
	maxBody = 16 << 10
)

// Config configures a Client. URL is required.
type Config struct {
	// URL is the user service's base: GET {URL}/users/{id}.
	URL                                         string
	TTL, RefreshAhead, Timeout, StaleFor, Retry time.Duration
	MaxUsers                                    int
	// HTTPClient makes the calls (default: a client of its own).
	HTTPClient *http.Client
	// Clock is the cache's time source, for tests (default: real time).
	Clock  otter.Clock
	Logger *slog.Logger
}

// Client implements flashsale.UserFacts over the user service.
type Client struct {
	base    string
	http    *http.Client
	cache   *otter.Cache[string, entry]
	loader  otter.Loader[string, entry]
	now     func() int64 // the cache's clock, in ns
	ttl     time.Duration
	timeout time.Duration
	retry   time.Duration
	log     *slog.Logger
	// downUntil is the clock time (ns) until which the service is taken
	// for down after a failed call: a stale read does not wait for it.
	downUntil atomic.Int64
	// calls counts calls made, for tests.
	calls atomic.Int64
}

var _ flashsale.UserFacts = (*Client)(nil)

// entry is a user's facts and when they were fetched (clock ns).
type entry struct {
	facts flashsale.Facts
	at    int64
}

// New returns a Client. Close it to stop the cache's goroutines.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("usersvc: URL %q must be an http:// or https:// URL", cfg.URL)
	}
	c := &Client{
		base:    strings.TrimSuffix(cfg.URL, "/"),
		http:    cfg.HTTPClient,
		now:     func() int64 { return time.Now().UnixNano() },
		ttl:     orDefault(cfg.TTL, TTLDefault),
		timeout: orDefault(cfg.Timeout, TimeoutDefault),
		retry:   orDefault(cfg.Retry, RetryDefault),
		log:     cfg.Logger,
	}
	if c.http == nil {
		c.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	}
	if cfg.Clock != nil {
		c.now = cfg.Clock.NowNano
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	ahead := orDefault(cfg.RefreshAhead, RefreshAheadDefault)
	if ahead >= c.ttl {
		return nil, fmt.Errorf("usersvc: the refresh must start before the TTL ends (%s ahead of %s)", ahead, c.ttl)
	}
	staleFor := max(orDefault(cfg.StaleFor, StaleForDefault), c.ttl)
	c.loader = otter.LoaderFunc[string, entry](c.load)
	c.cache, err = otter.New(&otter.Options[string, entry]{
		MaximumSize:       orDefault(cfg.MaxUsers, MaxUsersDefault),
		ExpiryCalculator:  otter.ExpiryWriting[string, entry](staleFor),
		RefreshCalculator: refreshAhead{after: c.ttl - ahead, retry: c.retry},
		Clock:             cfg.Clock,
		// Failures are logged here, once per outage, not per refresh.
		Logger: &otter.NoopLogger{},
	})
	if err != nil {
		return nil, fmt.Errorf("usersvc: %w", err)
	}
	return c, nil
}

func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Close stops the cache's goroutines and drops idle connections.
func (c *Client) Close() error {
	c.cache.StopAllGoroutines()
	c.http.CloseIdleConnections()
	return nil
}

// Facts returns userID's facts: fresh from the cache, else from the user
// service, else (the service down) the last ones it gave within StaleFor.
func (c *Client) Facts(ctx context.Context, userID string) (flashsale.Facts, error) {
	e, err := c.cache.Get(ctx, userID, c.loader)
	if err != nil {
		return flashsale.Facts{}, err
	}
	now := c.now()
	if now-e.at < int64(c.ttl) || now < c.downUntil.Load() {
		return e.facts, nil
	}
	// Past its TTL: no guest asked in its refresh window, or the refresh
	// failed. Wait for one (joined if in flight) within the deadline.
	select {
	case r := <-c.cache.Refresh(ctx, userID, c.loader):
		if r.Err == nil {
			return r.Value.facts, nil
		}
	case <-ctx.Done():
	}
	return e.facts, nil
}

// load is the cache's loader (for misses and refreshes alike). It runs on
// its own deadline, detached from the caller's cancellation: a collapsed
// load serves every guest waiting for it, not only the first.
func (c *Client) load(ctx context.Context, userID string) (entry, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	f, err := c.fetch(ctx, userID)
	if err != nil {
		now := c.now()
		if c.downUntil.Swap(now+int64(c.retry)) < now {
			c.log.WarnContext(ctx, "user service unreachable; serving cached user facts", "user_id", userID, "err", err)
		}
		return entry{}, fmt.Errorf("%w: user=%s: %w", flashsale.ErrFactsUnavailable, userID, err)
	}
	if c.downUntil.Swap(0) != 0 {
		c.log.InfoContext(ctx, "user service answers again")
	}
	return entry{facts: f, at: c.now()}, nil
}

// fetch asks the user service once. A user it does not know (404) has no
// facts: no tier, no stays, no channel.
func (c *Client) fetch(ctx context.Context, userID string) (flashsale.Facts, error) {
	c.calls.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/users/"+url.PathEscape(userID), nil)
	if err != nil {
		return flashsale.Facts{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return flashsale.Facts{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return flashsale.Facts{}, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return flashsale.Facts{}, nil
	case resp.StatusCode != http.StatusOK:
		return flashsale.Facts{}, fmt.Errorf("GET /users/%s: status %d", userID, resp.StatusCode)
	case len(body) > maxBody:
		return flashsale.Facts{}, fmt.Errorf("GET /users/%s: answer longer than %d bytes", userID, maxBody)
	}
	return DecodeFacts(body)
}

// factsJSON is the user service's answer. Fields it adds are ignored.
type factsJSON struct {
	Tier     string `json:"tier"`
	Stays30d int    `json:"stays_30d"`
	Channel  string `json:"channel"`
}

var errBadFacts = errors.New("malformed user facts")

// DecodeFacts reads the user service's answer, refusing what no user could
// have: a negative or absurd stay count, an overlong tier or channel.
func DecodeFacts(b []byte) (flashsale.Facts, error) {
	var j factsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return flashsale.Facts{}, fmt.Errorf("%w: %w", errBadFacts, err)
	}
	switch {
	case j.Stays30d < 0 || j.Stays30d > 1000:
		return flashsale.Facts{}, fmt.Errorf("%w: stays_30d %d", errBadFacts, j.Stays30d)
	case len(j.Tier) > 32 || len(j.Channel) > flashsale.MaxChannelLen:
		return flashsale.Facts{}, fmt.Errorf("%w: tier or channel too long", errBadFacts)
	}
	return flashsale.Facts{Tier: flashsale.Tier(j.Tier), Stays30d: j.Stays30d, Channel: j.Channel}, nil
}

// refreshAhead makes an entry refreshable `after` its last successful
// load, and `retry` after a failed refresh (otter's RefreshWriting would
// try again on every read while the service is down).
type refreshAhead struct{ after, retry time.Duration }

func (r refreshAhead) RefreshAfterCreate(otter.Entry[string, entry]) time.Duration { return r.after }
func (r refreshAhead) RefreshAfterUpdate(otter.Entry[string, entry], entry) time.Duration {
	return r.after
}
func (r refreshAhead) RefreshAfterReload(otter.Entry[string, entry], entry) time.Duration {
	return r.after
}
func (r refreshAhead) RefreshAfterReloadFailure(otter.Entry[string, entry], error) time.Duration {
	return r.retry
}
