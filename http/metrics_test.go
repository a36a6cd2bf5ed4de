package http

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestRouteTimer: every route's requests are timed under its pattern, what
// no route matched under "unmatched", and /metrics is the handler given or
// a 404 without one.
func TestRouteTimer(t *testing.T) {
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		asked = map[string]bool{}
	)
	route := func(pattern string) func(time.Duration) {
		asked[pattern] = true
		return func(d time.Duration) {
			mu.Lock()
			seen[pattern]++
			mu.Unlock()
		}
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("# metrics\n")) })
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{Route: route, Metrics: metrics})
	for _, path := range []string{"/healthz", "/healthz", "/nope", "/metrics"} {
		do(t, s, "GET", path, "", "")
	}
	for pattern, want := range map[string]int{"GET /healthz": 2, "unmatched": 1, "GET /metrics": 1} {
		if seen[pattern] != want {
			t.Errorf("%q timed %d times, want %d (all: %v)", pattern, seen[pattern], want, seen)
		}
	}
	if asked[eventsRoute] || !asked["GET /api/sales/{id}"] {
		t.Errorf("timed routes %v: every route but the event stream (a stream's length is no latency)", asked)
	}
	if w := do(t, s, "GET", "/metrics", "", ""); w.Code != http.StatusOK || w.Body.String() != "# metrics\n" {
		t.Errorf("GET /metrics = %d %q", w.Code, w.Body.String())
	}
	if w := do(t, NewServer(flashsale.ServiceOf(&stubService{}), Config{}), "GET", "/metrics", "", ""); w.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a handler = %d, want 404", w.Code)
	}
}
