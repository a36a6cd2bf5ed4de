package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	fshttp "github.com/flashsale/flashsale/http"
)

// Draining: on SIGTERM the instance first says it is not ready, for
// Config.ShutdownDelay, so load balancers stop sending it guests while it
// still answers them; then the HTTP server stops accepting and waits for
// the requests in flight (a purchase ends with its order committed or
// confirmed by the queue), and only then does everything close, in the
// reverse of the order it opened (the service's loops, the group-commit
// writer's last batch, the publisher's outstanding confirms, the consumer's
// batch in hand).

// server is the public HTTP server's lifecycle: its listener, the drain
// gate in front of the routes and the write bounds in front of the gate
// (a draining /readyz is a small answer, bounded like every other).
type server struct {
	ln   net.Listener
	gate *drainGate
	srv  *http.Server
	log  *slog.Logger
}

// listen opens addr and serves routes behind the drain gate and the write
// bounds until shutdown.
func listen(addr string, routes http.Handler, log *slog.Logger) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &server{ln: ln, gate: &drainGate{next: routes}, log: log}
	s.srv = &http.Server{
		Handler:           fshttp.BoundWrites(s.gate, fshttp.WriteTimeoutDefault),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// No WriteTimeout: fshttp.BoundWrites sets the deadline on the
		// answers that can be large, not on every request.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	}()
	return s, nil
}

// drain marks the instance not ready and waits delay, so the load
// balancer has seen it go before it stops accepting; or until ctx ends
// (an operator's second signal: stop waiting, shut down now).
func (s *server) drain(ctx context.Context, delay time.Duration) {
	s.gate.draining.Store(true)
	s.log.Info("draining: not ready, still serving", "for", delay)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		s.log.Warn("draining cut short by a second signal; shutting down now (a third ends the process at once)")
	}
}

// shutdown stops accepting and waits up to ShutdownDefault for the
// requests in flight.
func (s *server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownDefault)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

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
