package main

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Draining: on SIGTERM the instance first says it is not ready, for
// Config.ShutdownDelay, so load balancers stop sending it guests while it
// still answers them; then the HTTP server stops accepting and waits for
// the requests in flight (a purchase ends with its order committed or
// confirmed by the queue), and only then does everything close, in the
// reverse of the order it opened (the service's loops, the group-commit
// writer's last batch, the publisher's outstanding confirms, the consumer's
// batch in hand).

// drainGate answers /readyz 503 once draining began, and passes every
// other request through.
type drainGate struct {
	next     http.Handler
	draining atomic.Bool
}

func (g *drainGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.draining.Load() && r.URL.Path == "/readyz" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"ready":false,"draining":true}` + "\n"))
		return
	}
	g.next.ServeHTTP(w, r)
}

// Drain marks the instance not ready and waits delay before Close, so the
// load balancer has seen it go before it stops accepting.
func (m *Main) Drain(delay time.Duration) {
	if m.gate == nil {
		return
	}
	m.gate.draining.Store(true)
	m.log.Info("draining: not ready, still serving", "for", delay)
	time.Sleep(delay)
}
