package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/metrics"
)

// queueSource is the metrics' view of the order path's two ends.
func queueSource(pub *amqp.Publisher, c *amqp.Consumer) *metrics.QueueSource {
	return &metrics.QueueSource{
		Stats: func() metrics.QueueStats {
			p, s := pub.Stats(), c.Stats()
			return metrics.QueueStats{
				Published: p.Published, Confirmed: p.Confirmed, Failed: p.Failed,
				Indeterminate: p.Indeterminate, Returned: p.Returned,
				Consumed: s.Consumed, Batches: s.Batches, Acked: s.Acked, Requeued: s.Requeued,
				Redelivered: s.Redelivered, Retried: s.Retried, Dead: s.Dead,
			}
		},
		Backlog: c.Backlog,
	}
}

// openMetrics returns the handler of /metrics on the main listener, or
// nil after serving it on a listener of its own when
// FLASHSALE_METRICS_ADDR is set.
func (m *Main) openMetrics() (http.Handler, error) {
	if m.Config.MetricsAddr == "" {
		return m.metrics.Handler(), nil
	}
	ln, err := net.Listen("tcp", m.Config.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen FLASHSALE_METRICS_ADDR: %w", err)
	}
	m.metricsAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	m.closers = append(m.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	})
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics server", "err", err)
		}
	}()
	m.log.Info("metrics listening", "addr", m.metricsAddr)
	return nil, nil
}
