package usersvc_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/usersvc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is the cache's clock in these tests: it moves only when told,
// so a 30 s TTL is tested without waiting 30 s. Its Tick is nil: no
// periodic clean-up, expiry is checked on read.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) NowNano() int64                      { return c.ns.Load() }
func (c *fakeClock) Tick(time.Duration) <-chan time.Time { return nil }
func (c *fakeClock) Advance(d time.Duration)             { c.ns.Add(int64(d)) }

// userService is a fake user service: it answers GET /users/{id} from
// facts, counts the calls, answers 503 while down, and holds each call
// until hold is closed when hold is set.
type userService struct {
	mu    sync.Mutex
	facts map[string]map[string]any
	calls atomic.Int64
	down  atomic.Bool
	hold  chan struct{}
	*httptest.Server
}

func newUserService(t *testing.T) *userService {
	us := &userService{facts: map[string]map[string]any{
		"alice": {"tier": "gold", "stays_30d": 3, "channel": "ota-x", "name": "Alice"},
	}}
	us.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		us.calls.Add(1)
		if us.hold != nil {
			select {
			case <-us.hold:
			case <-r.Context().Done():
				return
			}
		}
		if us.down.Load() {
			http.Error(w, "upgrading", http.StatusServiceUnavailable)
			return
		}
		id, ok := strings.CutPrefix(r.URL.Path, "/users/")
		us.mu.Lock()
		f, known := us.facts[id]
		us.mu.Unlock()
		if !ok || !known {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(f)
	}))
	t.Cleanup(us.Close)
	return us
}

func (us *userService) set(id string, f map[string]any) {
	us.mu.Lock()
	us.facts[id] = f
	us.mu.Unlock()
}

func mustClient(t *testing.T, cfg usersvc.Config) *usersvc.Client {
	t.Helper()
	c, err := usersvc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var alice = flashsale.Facts{Tier: flashsale.TierGold, Stays30d: 3, Channel: "ota-x"}

func TestFacts(t *testing.T) {
	us := newUserService(t)
	c := mustClient(t, usersvc.Config{URL: us.URL + "/", Clock: newFakeClock()})
	t.Run("OK", func(t *testing.T) {
		got, err := c.Facts(t.Context(), "alice")
		if err != nil || got != alice {
			t.Fatalf("Facts = %+v, %v; want %+v", got, err, alice)
		}
	})
	t.Run("Unknown", func(t *testing.T) {
		// A user the platform does not know has no facts, and that is cached too.
		for range 3 {
			if got, err := c.Facts(t.Context(), "nobody"); err != nil || got != (flashsale.Facts{}) {
				t.Fatalf("Facts(nobody) = %+v, %v; want none", got, err)
			}
		}
	})
	if n := us.calls.Load(); n != 2 {
		t.Errorf("calls = %d, want 2 (one per user)", n)
	}
}

// TestRefreshAhead: a read in the last seconds of the TTL is answered from
// the cache at once and refreshes it in the background, so the next read
// has the new facts without having waited for the service.
func TestRefreshAhead(t *testing.T) {
	us := newUserService(t)
	clock := newFakeClock()
	c := mustClient(t, usersvc.Config{URL: us.URL, Clock: clock})
	ctx := t.Context()
	if _, err := c.Facts(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	us.set("alice", map[string]any{"tier": "platinum", "stays_30d": 4})
	clock.Advance(20 * time.Second)
	if got, _ := c.Facts(ctx, "alice"); got != alice || us.calls.Load() != 1 {
		t.Fatalf("at 20 s: %+v after %d calls; want the cached facts, 1 call", got, us.calls.Load())
	}
	clock.Advance(6 * time.Second) // 26 s: inside the TTL, in the refresh window
	if got, _ := c.Facts(ctx, "alice"); got != alice {
		t.Fatalf("at 26 s: %+v; want the cached facts answered at once", got)
	}
	want := flashsale.Facts{Tier: flashsale.TierPlatinum, Stays30d: 4}
	checkFor(t, 2*time.Second, func() bool {
		got, _ := c.Facts(ctx, "alice")
		return got == want
	})
	if n := us.calls.Load(); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}
}

// TestStale: while the user service is down, a user's last facts are
// served past their TTL, up to StaleFor; a user with nothing cached is
// ErrFactsUnavailable, a 503.
func TestStale(t *testing.T) {
	us := newUserService(t)
	clock := newFakeClock()
	c := mustClient(t, usersvc.Config{URL: us.URL, Clock: clock, StaleFor: 10 * time.Minute})
	ctx := t.Context()
	if _, err := c.Facts(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	t0 := clock.NowNano()
	us.down.Store(true)
	for _, at := range []time.Duration{31 * time.Second, time.Minute, 9 * time.Minute} {
		clock.ns.Store(t0 + int64(at))
		got, err := c.Facts(ctx, "alice")
		if err != nil || got != alice {
			t.Fatalf("down, +%s: Facts = %+v, %v; want the stale facts", at, got, err)
		}
	}
	if us.calls.Load() < 2 {
		t.Errorf("calls = %d: the stale entry was never tried again", us.calls.Load())
	}
	t.Run("ErrFactsUnavailable", func(t *testing.T) {
		_, err := c.Facts(ctx, "bob")
		if !errors.Is(err, flashsale.ErrFactsUnavailable) || flashsale.ErrorCode(err) != flashsale.EUnavailable {
			t.Fatalf("nothing cached, service down: err = %v, want ErrFactsUnavailable", err)
		}
	})
	t.Run("PastStaleFor", func(t *testing.T) {
		clock.Advance(10 * time.Minute)
		if _, err := c.Facts(ctx, "alice"); !errors.Is(err, flashsale.ErrFactsUnavailable) {
			t.Fatalf("past StaleFor: err = %v, want ErrFactsUnavailable", err)
		}
	})
	t.Run("Back", func(t *testing.T) {
		us.down.Store(false)
		if got, err := c.Facts(ctx, "alice"); err != nil || got != alice {
			t.Fatalf("service back: Facts = %+v, %v", got, err)
		}
	})
}

// TestCollapse: 1 000 guests asking at once for a user nobody has asked
// for cost the user service one call.
func TestCollapse(t *testing.T) {
	us := newUserService(t)
	us.hold = make(chan struct{})
	c := mustClient(t, usersvc.Config{URL: us.URL, Clock: newFakeClock(), Timeout: 10 * time.Second})
	const guests = 1000
	var started, wg sync.WaitGroup
	started.Add(guests)
	errs := make(chan error, guests)
	for range guests {
		wg.Go(func() {
			started.Done()
			got, err := c.Facts(t.Context(), "alice")
			if err == nil && got != alice {
				err = errors.New("wrong facts")
			}
			if err != nil {
				errs <- err
			}
		})
	}
	started.Wait()
	checkFor(t, 5*time.Second, func() bool { return us.calls.Load() >= 1 })
	close(us.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := us.calls.Load(); n != 1 {
		t.Errorf("calls = %d for %d concurrent misses, want 1", n, guests)
	}
}

// TestDeadline: a user service that never answers costs a call no more
// than its deadline, and is a 503.
func TestDeadline(t *testing.T) {
	us := newUserService(t)
	us.hold = make(chan struct{}) // never closed: every call hangs
	c := mustClient(t, usersvc.Config{URL: us.URL, Clock: newFakeClock(), Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := c.Facts(t.Context(), "alice")
	if took := time.Since(start); took > time.Second {
		t.Errorf("Facts took %s with a 50 ms deadline", took)
	}
	if flashsale.ErrorCode(err) != flashsale.EUnavailable || !flashsale.Unreachable(err) {
		t.Errorf("err = %v, want unavailable", err)
	}
}

func TestNewBadConfig(t *testing.T) {
	for _, cfg := range []usersvc.Config{
		{URL: ""}, {URL: "ftp://x"}, {URL: "http://"}, {URL: "::"},
		{URL: "http://x", TTL: time.Second, RefreshAhead: time.Second},
	} {
		if c, err := usersvc.New(cfg); err == nil {
			c.Close()
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestDecodeFacts(t *testing.T) {
	good := []struct {
		body string
		want flashsale.Facts
	}{
		{`{"tier":"gold","stays_30d":2,"channel":"ota-x"}`, flashsale.Facts{Tier: "gold", Stays30d: 2, Channel: "ota-x"}},
		{`{}`, flashsale.Facts{}},
		{`{"tier":"silver","extra":{"a":1}}`, flashsale.Facts{Tier: "silver"}},
	}
	for _, tt := range good {
		if got, err := usersvc.DecodeFacts([]byte(tt.body)); err != nil || got != tt.want {
			t.Errorf("DecodeFacts(%s) = %+v, %v; want %+v", tt.body, got, err, tt.want)
		}
	}
	for _, body := range []string{
		``, `null x`, `[]`, `{"stays_30d":-1}`, `{"stays_30d":1001}`, `{"stays_30d":"2"}`, `{"stays_30d":1e99}`,
		`{"tier":"` + strings.Repeat("g", 33) + `"}`, `{"channel":"` + strings.Repeat("c", 65) + `"}`, `{"tier":5}`,
	} {
		if got, err := usersvc.DecodeFacts([]byte(body)); err == nil {
			t.Errorf("DecodeFacts(%s) = %+v, want an error", body, got)
		}
	}
}

// FuzzDecodeFacts: whatever the user service answers, decoding returns
// facts within bounds or an error, and never panics.
func FuzzDecodeFacts(f *testing.F) {
	for _, s := range []string{`{"tier":"gold","stays_30d":2,"channel":"ota-x"}`, `{}`, `{"stays_30d":-1}`, `[`, `{"tier":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := usersvc.DecodeFacts(b)
		if err != nil {
			return
		}
		if got.Stays30d < 0 || got.Stays30d > 1000 || len(got.Tier) > 32 || len(got.Channel) > flashsale.MaxChannelLen {
			t.Fatalf("DecodeFacts(%q) = %+v: out of bounds", b, got)
		}
	})
}

// checkFor polls cond until it holds or d passes.
func checkFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
