package http

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics/family"
)

// The operators' event stream: GET /api/admin/sales/{id}/stream pushes,
// once a second, what the console's dashboard of a sale draws: the admin
// view (stock per night, status, paused), this instance's purchase
// counters, funnel and purchase latency buckets as the metrics registry
// holds them, the last audit and the breaker. It rides the guests' event
// hub (events.go): one broadcaster per watched sale per instance, however
// many consoles watch it, coalescing, pings and shutdown alike.
//
// The admin token travels in the Authorization header like every admin
// call: the console reads this stream with fetch() and a ReadableStream
// reader, not EventSource (which cannot set headers), so the token is in
// no URL and no access log.
//
// The stream carries counters, not rates: the console takes a rate between
// two messages, as it did between two scrapes of /metrics. http/ reads the
// registry by the families' names (package family, where the metrics
// package registers them) and labels only; what an outcome means
// (which count as 503) is the console's reading, as it was of /metrics.
//
// Lock order: adminStream.mu is never held with eventHub.mu or room.mu.

// Defaults of the operators' stream.
const (
	// adminPoll is how often a watched sale's dashboard is read: the
	// dashboard moves once a second.
	adminPoll = time.Second
	// auditEvery is how old the last audit may grow before another one
	// starts: an audit reads the whole sale twice, too heavy for every
	// second.
	auditEvery = 10 * time.Second
	// adminStreamRoute is the operators' stream, not timed (isStreamRoute).
	adminStreamRoute = "GET /api/admin/sales/{id}/stream"
)

// isAdminStream reports whether path is an operators' stream.
func isAdminStream(path string) bool {
	return strings.HasPrefix(path, "/api/admin/sales/") && strings.HasSuffix(path, "/stream")
}

// adminStream is the hub of the operators' streams and the audits it
// keeps, one per watched sale.
type adminStream struct {
	hub *eventHub
	// gather reads this instance's metrics; nil when it has none.
	gather func() ([]*dto.MetricFamily, error)

	mu     sync.Mutex
	audits map[string]*auditCache
}

// auditCache is a sale's last audit and whether one is running.
type auditCache struct {
	at      time.Time // when the last one started
	running bool
	last    *auditJSON
	err     string
}

func newAdminStream(s *Server, gather func() ([]*dto.MetricFamily, error)) *adminStream {
	a := &adminStream{gather: gather, audits: map[string]*auditCache{}}
	a.hub = newEventHub(s)
	a.hub.poll, a.hub.gap = adminPoll, adminPoll
	a.hub.read = a.read
	return a
}

// dashboardJSON is one message of the operators' stream.
type dashboardJSON struct {
	Sale saleJSON `json:"sale"`
	// Figures is nil when this instance has no metrics registry.
	Figures *figuresJSON `json:"figures"`
	// Audit is the last audit (nil until the first ends); AuditError
	// the last one's failure, if it failed.
	Audit      *auditJSON `json:"audit"`
	AuditError string     `json:"audit_error,omitempty"`
	// Breaker is nil where there is none (the embedded shape).
	Breaker *flashsale.BreakerStatus `json:"breaker"`
}

// figuresJSON is this instance's counters of one sale, cumulative since
// the process started (Process tells a restart).
type figuresJSON struct {
	Process float64 `json:"process_start"`
	// Purchases counts purchases by outcome, Steps the funnel by step.
	Purchases map[string]float64 `json:"purchases"`
	Steps     map[string]float64 `json:"steps"`
	// Latency is the purchase route's histogram, every sale together.
	Latency latencyJSON `json:"purchase_latency"`
}

// latencyJSON is a cumulative histogram; the +Inf bucket is Count (JSON
// has no infinity).
type latencyJSON struct {
	Count   uint64       `json:"count"`
	Buckets []bucketJSON `json:"buckets"`
}

type bucketJSON struct {
	LE    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// handleStream answers an unknown sale with a JSON error, then streams.
func (a *adminStream) handleStream(w http.ResponseWriter, r *http.Request) {
	s := a.hub.s
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	first, err := a.read(ctx, id)
	cancel()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a.hub.stream(w, r, id, first)
}

// read is one message: the admin view, the figures, the breaker, and the
// last audit, starting the next one when it is due.
func (a *adminStream) read(ctx context.Context, id string) ([]byte, error) {
	s := a.hub.s
	v, err := s.svc.AdminSale(ctx, id)
	if err != nil {
		return nil, err
	}
	d := dashboardJSON{Sale: adminView(v)}
	if b, err := s.svc.Breaker(ctx); err == nil {
		d.Breaker = b
	}
	if a.gather != nil {
		// A load test's sale counts under sale="test" with every other
		// test sale's (its ID is never a label: /metrics may be public).
		label := id
		if v.Sale.Test {
			label = family.TestSale
		}
		d.Figures = a.figures(label)
	}
	d.Audit, d.AuditError = a.audit(id)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return sseMessage("dashboard", b), nil
}

// audit returns the sale's last audit and starts one when the last is
// older than auditEvery. The audit runs on its own, under auditTimeout and
// the hub's life (a shutdown ends it): the stream goes on with the last
// result meanwhile.
func (a *adminStream) audit(id string) (*auditJSON, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.audits[id]
	if c == nil {
		c = &auditCache{}
		a.audits[id] = c
	}
	if !c.running && time.Since(c.at) >= auditEvery {
		c.running, c.at = true, time.Now()
		go a.runAudit(id, c)
	}
	return c.last, c.err
}

func (a *adminStream) runAudit(id string, c *auditCache) {
	ctx, cancel := context.WithTimeout(a.hub.life, auditTimeout)
	defer cancel()
	r, err := a.hub.s.svc.Audit(ctx, id)
	a.mu.Lock()
	defer a.mu.Unlock()
	c.running = false
	if err != nil {
		c.err = flashsale.ErrorMessage(err)
		return
	}
	j := auditView(r)
	c.last, c.err = &j, ""
}

// figures picks the series of sale label out of the registry. A failed gather
// gives what it could read: the registry reports a collector's error
// beside the families it did collect.
func (a *adminStream) figures(id string) *figuresJSON {
	fams, _ := a.gather()
	f := &figuresJSON{Purchases: map[string]float64{}, Steps: map[string]float64{}, Latency: latencyJSON{Buckets: []bucketJSON{}}}
	for _, fam := range fams {
		switch fam.GetName() {
		case family.ProcessStart:
			for _, m := range fam.GetMetric() {
				f.Process = m.GetGauge().GetValue()
			}
		case family.Purchases:
			for _, m := range fam.GetMetric() {
				if label(m, "sale") == id {
					f.Purchases[label(m, "outcome")] += m.GetCounter().GetValue()
				}
			}
		case family.FunnelSteps:
			for _, m := range fam.GetMetric() {
				if label(m, "sale") == id {
					f.Steps[label(m, "step")] += m.GetCounter().GetValue()
				}
			}
		case family.RequestDuration:
			for _, m := range fam.GetMetric() {
				if label(m, "route") != purchaseRoute {
					continue
				}
				h := m.GetHistogram()
				f.Latency.Count = h.GetSampleCount()
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						f.Latency.Buckets = append(f.Latency.Buckets, bucketJSON{LE: b.GetUpperBound(), Count: b.GetCumulativeCount()})
					}
				}
			}
		}
	}
	return f
}

// label is a sample's value of the label name, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
