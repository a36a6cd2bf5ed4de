// Package metrics is the service's Prometheus instrumentation: it owns the
// registry and every collector (client_golang), and plugs into the other
// packages through the seams they already have: funnel.Observer, the
// http server's route timer, the group-commit writer's hook, and wrappers
// of flashsale.StockEngine and flashsale.Store. Only internal/app wires it;
// no other package imports it. The names other code reads (the operators'
// stream, the console, the bench) are defined once, in package family.
//
// Per-sale labels are bounded: up to MaxSalesDefault sales the funnel
// reports are tracked under their ID, every other one under sale="other";
// a sale that ended over EndedKeep ago loses its series (at the next
// scrape or the next sale tracked). A load test's sale counts under
// sale="test", never its ID: /metrics is often on the public port, and a
// test sale is hidden from the sale list (its ID leaked there, issue 23).
// The counters a purchase moves are resolved once per sale and kept in a
// copy-on-write map, so the hot path takes no lock and allocates nothing.
package metrics

import (
	"cmp"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics/family"
)

// Defaults for Config.
const (
	// MaxSalesDefault bounds the sales tracked under their own label: a
	// deployment runs a handful at once, and each costs a few dozen series.
	MaxSalesDefault = 100
	// OtherSale is the label of every sale beyond the cap, and of IDs the
	// funnel never reported (an unknown sale must not mint a series).
	OtherSale = "other"
	// TestSale is the label every load test's sale counts under.
	TestSale = family.TestSale
	// EndedKeep is how long after its end a sale keeps its series: long
	// enough for the last scrapes and the dashboards' final figures; an
	// ended sale's series are no one's business for longer.
	EndedKeep = 10 * time.Minute
)

// namespace prefixes every family (family.Namespace).
const namespace = family.Namespace

// Config configures the metrics.
type Config struct {
	// MaxSales bounds the sales tracked by ID (default MaxSalesDefault).
	MaxSales int
	// Now is the clock that tells ended sales (time.Now when nil).
	Now func() time.Time
}

// Metrics is the registry and the collectors. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	max int
	now func() time.Time

	mu    sync.Mutex                          // serialises adding sales
	sales atomic.Pointer[map[string]*saleSet] // copy-on-write: read without a lock
	other *saleSet
	test  *saleSet // every test sale's (TestSale)

	purchases    *prometheus.CounterVec
	steps        *prometheus.CounterVec
	holdExpiries *prometheus.CounterVec
	releaseDelay prometheus.Histogram
	auditFound   *prometheus.GaugeVec
	auditLeft    *prometheus.GaugeVec
	saleInfo     *prometheus.GaugeVec
	audits       *prometheus.CounterVec

	routes *prometheus.HistogramVec

	engineDur   *prometheus.HistogramVec
	engineCalls *prometheus.CounterVec
	dbDur       *prometheus.HistogramVec
	dbCalls     *prometheus.CounterVec
	dbPlaced    *prometheus.CounterVec

	batchSize  prometheus.Histogram
	commitDur  prometheus.Histogram
	commitErrs prometheus.Counter
}

// New returns the metrics with every family registered, and the Go runtime
// and process collectors beside them.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), max: cmp.Or(cfg.MaxSales, MaxSalesDefault), now: cfg.Now}
	if m.now == nil {
		m.now = time.Now
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{m.reg}

	m.purchases = f.counterVec(family.Purchases, "Purchases answered, by sale and outcome (ok, or the refusal's code; overloaded and indeterminate split out of unavailable).", "sale", "outcome")
	m.steps = f.counterVec(family.FunnelSteps, "Purchases that passed each step of the funnel: requested, admitted, reserved, written, paid.", "sale", "step")
	m.holdExpiries = f.counterVec(namespace+"_hold_expiries_total", "Held orders expired and released by the reaper.", "sale")
	m.releaseDelay = f.histogram(namespace+"_hold_release_delay_seconds", "How long after its hold ended an expired order's units were back in the stock engine.")
	m.auditFound = f.gaugeVec(namespace+"_audit_findings", "Findings of the sale's last scheduled audit (drift between the books), before repair.", "sale")
	m.auditLeft = f.gaugeVec(namespace+"_audit_unrepaired_findings", "Findings the sale's last scheduled audit left after repairing what is safe.", "sale")
	m.saleInfo = f.gaugeVec(namespace+"_sale_info", "1 for each sale tracked under its own ID; a load test's sale counts under sale=\"test\" and has none. The test label, always \"false\", is kept for queries written to it.", "sale", "test")
	m.audits = f.counterVec(namespace+"_audits_total", "Scheduled audits run, by result: balanced, drift, error.", "result")

	m.routes = f.histogramVec(family.RequestDuration, "HTTP request latency by route pattern.", "route")

	m.engineDur = f.histogramVec(namespace+"_engine_call_duration_seconds", "Stock engine call latency by operation.", "op")
	m.engineCalls = f.counterVec(namespace+"_engine_calls_total", "Stock engine calls by operation and outcome.", "op", "outcome")
	m.dbDur = f.histogramVec(namespace+"_db_call_duration_seconds", "Database call latency by operation.", "op")
	m.dbCalls = f.counterVec(family.DBCalls, "Database calls by operation and outcome: ok, refused (a conditional update or lookup said no), timeout, error.", "op", "outcome")
	m.dbPlaced = f.counterVec(family.DBOrdersPlaced, "Reservations the database's conditional insert was asked to place, by result.", "result")

	m.batchSize = f.histogramBuckets(namespace+"_group_commit_batch_size", "Reservations per group-commit transaction (embedded shape).", prometheus.ExponentialBuckets(1, 2, 11))
	m.commitDur = f.histogram(namespace+"_group_commit_duration_seconds", "Time of one group-commit transaction, fsync included.")
	m.commitErrs = f.counter(namespace+"_group_commit_errors_total", "Group-commit transactions that failed.")

	m.other = m.newSaleSet(OtherSale, time.Time{})
	m.test = m.newSaleSet(TestSale, time.Time{})
	empty := map[string]*saleSet{}
	m.sales.Store(&empty)
	return m
}

// The Watch methods register the families read at scrape time, once each,
// for the parts a shape has (the embedded one has no breaker or queue).

// WatchStock reports the stock per night of the current sales.
func (m *Metrics) WatchStock(src StockSource) {
	m.reg.MustRegister(&stockCollector{src: src, max: m.max})
}

// WatchBreaker reports the stock engine's circuit breaker.
func (m *Metrics) WatchBreaker(b flashsale.Breaker) { m.reg.MustRegister(&breakerCollector{b: b}) }

// WatchInstances reports how many instances share the stock engine's
// Redis, as this one counts them: what it divides every rate limit by
// (flashsale.Shared).
func (m *Metrics) WatchInstances(n func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: namespace + "_instances",
		Help: "The instances sharing the stock engine's Redis, by their heartbeats: each allows its share (1/n) of every rate limit."},
		func() float64 { return float64(n()) }))
}

// WatchSelling reports the sell mode (db mode).
func (m *Metrics) WatchSelling(fn func() (flashsale.SellMode, flashsale.Selling)) {
	m.reg.MustRegister(&sellingCollector{fn: fn})
}

// WatchQueue reports the queue's counters and backlog.
func (m *Metrics) WatchQueue(src *QueueSource) { m.reg.MustRegister(&queueCollector{src: src}) }

// Handler serves the registry in the Prometheus exposition formats. A
// collector that fails (the stock per night while the breaker is open)
// leaves its family out instead of failing the scrape: the metrics are
// most wanted while a dependency is out.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.sweep()
		h.ServeHTTP(w, r)
	})
}

// Registry is the registry, for tests that gather it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// saleSet is one sale's counters, resolved once so an observation is an
// atomic add.
type saleSet struct {
	outcomes [len(outcomes)]prometheus.Counter
	steps    [numSteps]prometheus.Counter
	expiries prometheus.Counter
	label    string
	ends     time.Time
}

func (m *Metrics) newSaleSet(label string, ends time.Time) *saleSet {
	s := &saleSet{label: label, ends: ends, expiries: m.holdExpiries.WithLabelValues(label)}
	for i, o := range outcomes {
		s.outcomes[i] = m.purchases.WithLabelValues(label, o)
	}
	for i, st := range stepNames {
		s.steps[i] = m.steps.WithLabelValues(label, st)
	}
	return s
}

// sale is the counters of saleID: its own if tracked, else other's.
func (m *Metrics) sale(saleID string) *saleSet {
	if s := (*m.sales.Load())[saleID]; s != nil {
		return s
	}
	return m.other
}

// track starts tracking a sale under its ID if there is room, making
// room by forgetting the sales that ended over EndedKeep ago.
func (m *Metrics) track(saleID string, ends time.Time, test bool) {
	if saleID == "" || saleID == OtherSale || saleID == TestSale || (!ends.IsZero() && ends.Before(m.now().Add(-EndedKeep))) {
		return
	}
	if _, ok := (*m.sales.Load())[saleID]; ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.sales.Load()
	if _, ok := old[saleID]; ok {
		return
	}
	next := m.unended(old)
	if len(next) >= m.max {
		m.sales.Store(&next)
		return
	}
	if test {
		// Its place in the map only says "count under test"; it owns no series.
		next[saleID] = &saleSet{outcomes: m.test.outcomes, steps: m.test.steps, expiries: m.test.expiries, label: TestSale, ends: ends}
	} else {
		next[saleID] = m.newSaleSet(saleID, ends)
		m.saleInfo.WithLabelValues(saleID, "false").Set(1)
	}
	m.sales.Store(&next)
}

// sweep forgets the sales that ended over EndedKeep ago (at each scrape).
func (m *Metrics) sweep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.sales.Load()
	cutoff := m.now().Add(-EndedKeep)
	for _, s := range old {
		if !s.ends.IsZero() && s.ends.Before(cutoff) {
			next := m.unended(old)
			m.sales.Store(&next)
			return
		}
	}
}

// unended copies sales without those that ended over EndedKeep ago,
// deleting their series. The caller holds mu.
func (m *Metrics) unended(sales map[string]*saleSet) map[string]*saleSet {
	cutoff := m.now().Add(-EndedKeep)
	next := make(map[string]*saleSet, len(sales)+1)
	for id, s := range sales {
		if !s.ends.IsZero() && s.ends.Before(cutoff) {
			if s.label != TestSale {
				m.forget(s)
			}
			continue
		}
		next[id] = s
	}
	return next
}

// forget deletes an ended sale's series. A purchase of it racing this
// (answered "ended") may count once more under its old counter, which
// is no longer exported; the next counts under other.
func (m *Metrics) forget(s *saleSet) {
	for _, o := range outcomes {
		m.purchases.DeleteLabelValues(s.label, o)
	}
	for _, st := range stepNames {
		m.steps.DeleteLabelValues(s.label, st)
	}
	m.holdExpiries.DeleteLabelValues(s.label)
	m.auditFound.DeleteLabelValues(s.label)
	m.auditLeft.DeleteLabelValues(s.label)
	m.saleInfo.DeleteLabelValues(s.label, "false")
}

// factory registers families by their full names.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

// latencyBuckets are the classic buckets of every latency histogram,
// 100 µs to 10 s at a factor of about 1.43 (about ±20% at p99 and p999);
// scrapers that speak native histograms get factor 1.1 instead.
var latencyBuckets = prometheus.ExponentialBucketsRange(100e-6, 10, 33)

func latencyOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets,
		NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160}
}

func (f factory) histogram(name, help string) prometheus.Histogram {
	h := prometheus.NewHistogram(latencyOpts(name, help))
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramBuckets(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(latencyOpts(name, help), labels)
	f.reg.MustRegister(h)
	return h
}
