package http

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
)

// eventService answers PublicSale for the sales it knows, counting calls
// per sale; rooms left come from avail, and tick makes every read a change.
type eventService struct {
	flashsale.Service
	avail atomic.Int64
	tick  bool // each read takes one room, so every poll is a change
	err   error

	mu    sync.Mutex
	calls map[string]int
}

func newEventService() *eventService {
	s := &eventService{calls: map[string]int{}}
	s.avail.Store(1000)
	return s
}

func (s *eventService) PublicSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	s.mu.Lock()
	s.calls[id]++
	s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if id != "s1" && id != "s2" {
		return nil, flashsale.ErrNotFound
	}
	n := s.avail.Load()
	if s.tick {
		n = s.avail.Add(-1)
	}
	sale := *stubSale
	sale.ID = id
	return &flashsale.SaleView{Sale: &sale, Status: flashsale.SaleActive, ServerTime: t0,
		Nights: []flashsale.NightStock{{Date: testenv.Night(0), Stock: 1000, Available: int(n)}}}, nil
}

func (s *eventService) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id]
}

// sseEvent is one message read off a stream.
type sseEvent struct {
	at        time.Time
	name      string // "" for a comment
	available int
	status    string
}

// openStream GETs url and returns its messages as they arrive; the stream
// ends when the test does or cancel is called.
func openStream(t *testing.T, url string) (<-chan sseEvent, *http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ch <- sseEvent{at: time.Now()}
			case strings.HasPrefix(line, "event: "):
				ev.name, ev.at = strings.TrimPrefix(line, "event: "), time.Now()
			case strings.HasPrefix(line, "data: "):
				var d roomsEventJSON
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
					t.Errorf("data %q: %v", line, err)
					return
				}
				ev.status = string(d.Status)
				if len(d.Nights) == 1 {
					ev.available = d.Nights[0].Available
				}
			}
		}
	}()
	return ch, resp, cancel
}

// next returns the next rooms message, failing after d.
func next(t *testing.T, ch <-chan sseEvent, d time.Duration) sseEvent {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.name == "rooms" {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event within %s", d)
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startHub serves a hub (tuned by tune) on a real listener.
func startHub(t *testing.T, svc flashsale.Service, tune func(*eventHub)) (*eventHub, *httptest.Server) {
	t.Helper()
	s := NewServer(svc, Config{JWTSecret: testSecret})
	h := newEventHub(s)
	if tune != nil {
		tune(h)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/sales/{id}/events", h.handleEvents)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv
}

// TestEvents: through the API's own handler, with a request deadline of
// 50 ms: the first message is the sale now, a change arrives pushed, and
// the stream outlives the deadline.
func TestEvents(t *testing.T) {
	svc := newEventService()
	s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, RequestTimeout: 50 * time.Millisecond})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close) // before the streams' cancels, so those run first
	start := time.Now()
	ch, resp, _ := openStream(t, srv.URL+"/api/sales/s1/events")
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("content-type %q", got)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("cache-control %q", got)
	}
	if ev := next(t, ch, time.Second); ev.available != 1000 || ev.status != "active" {
		t.Fatalf("first event %+v", ev)
	}
	time.Sleep(100 * time.Millisecond) // past the request deadline
	svc.avail.Store(999)
	if ev := next(t, ch, 2*time.Second); ev.available != 999 {
		t.Fatalf("second event %+v", ev)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("test did not outlive the deadline")
	}
	// Only changes are sent: nothing while the rooms stand still.
	select {
	case ev := <-ch:
		if ev.name != "" {
			t.Fatalf("unchanged figures sent again: %+v", ev)
		}
	case <-time.After(1200 * time.Millisecond):
	}
}

// TestEventsCoalesced: the figures change at every 1 ms poll; each client
// still gets at most one update per 500 ms (two a second), the latest.
func TestEventsCoalesced(t *testing.T) {
	if eventGap < 500*time.Millisecond {
		t.Fatalf("eventGap %s allows more than two updates a second", eventGap)
	}
	svc := newEventService()
	svc.tick = true
	_, srv := startHub(t, flashsale.ServiceOf(svc), func(h *eventHub) { h.poll = time.Millisecond })
	var wg sync.WaitGroup
	for range 3 {
		ch, _, cancel := openStream(t, srv.URL+"/api/sales/s1/events")
		wg.Go(func() {
			var evs []sseEvent
			deadline := time.After(1700 * time.Millisecond)
		read:
			for {
				select {
				case ev := <-ch:
					if ev.name == "rooms" {
						evs = append(evs, ev)
					}
				case <-deadline:
					break read
				}
			}
			cancel()
			// 0 ms, then at 500, 1000 and 1500 at the soonest.
			if len(evs) < 3 || len(evs) > 4 {
				t.Errorf("%d updates in 1.7 s, want 3 or 4 (at most two a second)", len(evs))
			}
			for i := 1; i < len(evs); i++ {
				if gap := evs[i].at.Sub(evs[i-1].at); gap < 480*time.Millisecond {
					t.Errorf("updates %d and %d %s apart", i-1, i, gap)
				}
				if evs[i].available >= evs[i-1].available {
					t.Errorf("update %d not newer: %d after %d", i, evs[i].available, evs[i-1].available)
				}
			}
		})
	}
	wg.Wait()
}

// TestEventsOneBroadcasterPerSale: 20 clients on each of two sales make
// two poll loops, and the service is read at the poll rate, not 20 times
// it; when the clients go, the loops end and the reads stop.
func TestEventsOneBroadcasterPerSale(t *testing.T) {
	svc := newEventService()
	h, srv := startHub(t, flashsale.ServiceOf(svc), func(h *eventHub) { h.poll = 10 * time.Millisecond })
	var cancels []context.CancelFunc
	for _, id := range []string{"s1", "s2"} {
		for range 20 {
			ch, _, cancel := openStream(t, srv.URL+"/api/sales/"+id+"/events")
			next(t, ch, time.Second)
			cancels = append(cancels, cancel)
		}
	}
	if got := h.broadcasters(); got != 2 {
		t.Fatalf("%d broadcasters for 2 sales, want 2", got)
	}
	before := svc.count("s1")
	time.Sleep(300 * time.Millisecond)
	// 30 polls in 300 ms; 20 clients each polling would be 600.
	if got := svc.count("s1") - before; got > 40 {
		t.Fatalf("%d reads of s1 in 300 ms at one poll per 10 ms", got)
	}
	for _, c := range cancels[:20] { // s1's clients go
		c()
	}
	waitFor(t, 2*time.Second, "s1's broadcaster ends", func() bool { return h.broadcasters() == 1 })
	for _, c := range cancels[20:] {
		c()
	}
	waitFor(t, 2*time.Second, "every broadcaster ends", func() bool { return h.broadcasters() == 0 })
	n := svc.count("s1") + svc.count("s2")
	time.Sleep(100 * time.Millisecond)
	if got := svc.count("s1") + svc.count("s2"); got != n {
		t.Fatalf("reads went on with no subscriber: %d then %d", n, got)
	}
}

// TestEventsHeartbeat: a stream whose figures stand still still sends a
// comment line, so proxies keep it open.
func TestEventsHeartbeat(t *testing.T) {
	_, srv := startHub(t, flashsale.ServiceOf(newEventService()), func(h *eventHub) { h.heartbeat = 50 * time.Millisecond })
	ch, _, _ := openStream(t, srv.URL+"/api/sales/s1/events")
	next(t, ch, time.Second)
	select {
	case ev := <-ch:
		if ev.name != "" {
			t.Fatalf("want a ping, got %+v", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no heartbeat")
	}
}

// TestEventsServerTimeouts: a server's read and write timeouts (main's
// http.Server has both) do not end a stream.
func TestEventsServerTimeouts(t *testing.T) {
	svc := newEventService()
	s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret})
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close) // before the streams' cancels, so those run first
	ch, _, _ := openStream(t, srv.URL+"/api/sales/s1/events")
	next(t, ch, time.Second)
	time.Sleep(600 * time.Millisecond)
	svc.avail.Store(7)
	if ev := next(t, ch, 2*time.Second); ev.available != 7 {
		t.Fatalf("after the timeouts: %+v", ev)
	}
}

// TestEventsShutdown: Shutdown waits for idle connections, and a stream is
// never idle; the hub ends its streams when the server shuts down.
func TestEventsShutdown(t *testing.T) {
	h, srv := startHub(t, flashsale.ServiceOf(newEventService()), nil)
	ch, _, _ := openStream(t, srv.URL+"/api/sales/s1/events")
	next(t, ch, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a stream open: %v", err)
	}
	waitFor(t, time.Second, "broadcaster ends", func() bool { return h.broadcasters() == 0 })
}

// TestEventsBadInput: what cannot be streamed is a JSON error before any
// stream, and starts no broadcaster.
func TestEventsBadInput(t *testing.T) {
	limited := func(svc flashsale.Service) *Server {
		l := inmem.NewLimiter()
		t.Cleanup(func() { l.Close() })
		return NewServer(svc, Config{Limiter: l, ReadPerIP: flashsale.Rate{N: 1, Per: time.Minute, Burst: 1}})
	}
	tests := []struct {
		name, method, path string
		err                error
		limit              bool
		status             int
		code               string
	}{
		{"Unknown", "GET", "/api/sales/nope/events", nil, false, http.StatusNotFound, flashsale.ENotFound},
		{"TooLong", "GET", "/api/sales/" + strings.Repeat("x", maxIDLen+1) + "/events", nil, false, http.StatusNotFound, flashsale.ENotFound},
		{"Escaped", "GET", "/api/sales/%2e%2e%2Fs1/events", nil, false, http.StatusNotFound, flashsale.ENotFound},
		{"Nested", "GET", "/api/sales/s1/x/events", nil, false, http.StatusNotFound, flashsale.ENotFound},
		{"Post", "POST", "/api/sales/s1/events", nil, false, http.StatusMethodNotAllowed, EMethodNotAllowed},
		{"Unavailable", "GET", "/api/sales/s1/events", flashsale.ErrUnavailable, false, http.StatusServiceUnavailable, flashsale.EUnavailable},
		{"RateLimited", "GET", "/api/sales/s1/events", nil, true, http.StatusTooManyRequests, flashsale.ERateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := newEventService()
			svc.err = tt.err
			s := NewServer(flashsale.ServiceOf(svc), Config{})
			if tt.limit {
				s = limited(flashsale.ServiceOf(svc))
				do(t, s, "GET", "/api/sales/s2", "", "") // spends the burst
			}
			w := do(t, s, tt.method, tt.path, "", "")
			wantError(t, w, tt.status, tt.code)
			if tt.limit && svc.count("s1") != 0 {
				t.Fatal("a refused stream reached the service")
			}
		})
	}
}

// FuzzEventsPath: any sale ID in the path the service does not know is a
// JSON 404 (or the mux's redirect for a "." segment), never a stream.
func FuzzEventsPath(f *testing.F) {
	for _, id := range []string{"s1", "", "x", "../s1", "s1/events", "%00", strings.Repeat("a", 200), "ñ", " "} {
		f.Add(id)
	}
	svc := newEventService()
	svc.err = flashsale.ErrNotFound
	s := NewServer(flashsale.ServiceOf(svc), Config{})
	f.Fuzz(func(t *testing.T, id string) {
		path := "/api/sales/" + url.PathEscape(id) + "/events"
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, "GET", path, nil)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		switch w.Code {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			if w.Header().Get("Content-Type") != "application/json" || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%q: %d %q", path, w.Code, w.Body)
			}
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			// The mux cleans "." and ".." segments with a redirect.
		default:
			t.Fatalf("%q: status %d: %s", path, w.Code, w.Body)
		}
	})
}

// TestEventsPerClientCap: one client address holds at most
// StreamsPerClient guest streams (one address held 5 000, issue 23); the
// next is a 429 with Retry-After, another address is not affected, and a
// stream that ends frees its place.
func TestEventsPerClientCap(t *testing.T) {
	h, srv := startHub(t, flashsale.ServiceOf(newEventService()), func(h *eventHub) { h.s.streamsPerClient = 3 })
	var cancels []context.CancelFunc
	for range 3 {
		ch, _, cancel := openStream(t, srv.URL+"/api/sales/s1/events")
		next(t, ch, time.Second)
		cancels = append(cancels, cancel)
	}
	refused := func() *http.Response {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/sales/s2/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := refused(); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth stream from one address: %d, Retry-After %q; want 429 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	// Another address has places of its own.
	if !h.admit("192.0.2.9") {
		t.Fatal("another address refused")
	}
	h.release("192.0.2.9")
	cancels[0]()
	waitFor(t, 2*time.Second, "the ended stream's place is free", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.clients["127.0.0.1"] == 2
	})
	ch, _, _ := openStream(t, srv.URL+"/api/sales/s1/events")
	next(t, ch, time.Second)
}
