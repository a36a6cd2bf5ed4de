package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics/family"
)

// scrapeTimeout bounds what a scrape reads from the service and the queue.
const scrapeTimeout = 2 * time.Second

// StockSource is what the stock per night is read from at scrape time
// (flashsale.Service has both).
type StockSource interface {
	Sales(ctx context.Context) ([]*flashsale.SaleView, error)
	AdminSale(ctx context.Context, id string) (*flashsale.SaleView, error)
}

var stockDesc = prometheus.NewDesc(namespace+"_stock_rooms",
	"Rooms per night of each current sale, by state: available (the stock engine's figure), held and sold (the database's).",
	[]string{"sale", "night", "state"}, nil)

// stockCollector reads the current sales' stock at scrape time, at most
// max sales (the rest are left out, not summed: nights differ per sale).
type stockCollector struct {
	src StockSource
	max int
}

func (c *stockCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stockDesc }

func (c *stockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	sales, err := c.src.Sales(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(stockDesc, err)
		return
	}
	for i, s := range sales {
		if i >= c.max {
			break
		}
		v, err := c.src.AdminSale(ctx, s.ID)
		if err != nil {
			continue // ended or gone since the list
		}
		for _, n := range v.Nights {
			for _, st := range [...]struct {
				state string
				n     int
			}{{"available", n.Available}, {"held", n.Held}, {"sold", n.Sold}} {
				ch <- prometheus.MustNewConstMetric(stockDesc, prometheus.GaugeValue, float64(st.n), s.ID, n.Date, st.state)
			}
		}
	}
}

var (
	breakerStateDesc = prometheus.NewDesc(namespace+"_breaker_state",
		"The stock engine's circuit breaker: 1 for its current state (closed, open, half-open), 0 for the others.",
		[]string{"state"}, nil)
	breakerForcedDesc = prometheus.NewDesc(namespace+"_breaker_forced",
		"1 for the operator's override of the breaker now (auto when none).", []string{"forced"}, nil)
	breakerFailuresDesc = prometheus.NewDesc(namespace+"_breaker_consecutive_failures",
		"Stock engine calls that failed in a row.", nil, nil)
)

type breakerCollector struct{ b flashsale.Breaker }

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- breakerForcedDesc
	ch <- breakerFailuresDesc
}

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Status()
	for _, s := range []flashsale.BreakerState{flashsale.BreakerClosed, flashsale.BreakerOpen, flashsale.BreakerHalfOpen} {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, one(st.State == s), string(s))
	}
	for _, f := range []flashsale.BreakerForce{flashsale.BreakerAuto, flashsale.BreakerForceOpen, flashsale.BreakerForceClosed} {
		ch <- prometheus.MustNewConstMetric(breakerForcedDesc, prometheus.GaugeValue, one(st.Forced == f), string(f))
	}
	ch <- prometheus.MustNewConstMetric(breakerFailuresDesc, prometheus.GaugeValue, float64(st.ConsecutiveFailures))
}

var (
	sellPhaseDesc = prometheus.NewDesc(namespace+"_sell_phase",
		"The deployment's sell mode (db mode): 1 for its phase (engine, stopping, db, returning).", []string{"phase"}, nil)
	sellEpochDesc = prometheus.NewDesc(namespace+"_sell_epoch",
		"The sell mode's epoch: how many times it has changed.", nil, nil)
	sellingDesc = prometheus.NewDesc(family.Selling,
		"What this instance sells from: 1 for engine, db or none.", []string{"from"}, nil)
)

type sellingCollector struct {
	fn func() (flashsale.SellMode, flashsale.Selling)
}

func (c *sellingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sellPhaseDesc
	ch <- sellEpochDesc
	ch <- sellingDesc
}

func (c *sellingCollector) Collect(ch chan<- prometheus.Metric) {
	m, sel := c.fn()
	for _, p := range []flashsale.SellPhase{flashsale.PhaseEngine, flashsale.PhaseStopping, flashsale.PhaseDB, flashsale.PhaseReturning} {
		ch <- prometheus.MustNewConstMetric(sellPhaseDesc, prometheus.GaugeValue, one(m.Phase == p), string(p))
	}
	ch <- prometheus.MustNewConstMetric(sellEpochDesc, prometheus.GaugeValue, float64(m.Epoch))
	for _, s := range []flashsale.Selling{flashsale.SellingEngine, flashsale.SellingDB, flashsale.SellingNone} {
		ch <- prometheus.MustNewConstMetric(sellingDesc, prometheus.GaugeValue, one(sel == s), string(s))
	}
}

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// QueueStats are the queue's cumulative counters (amqp.Stats, converted
// where the program wires both, so this package needs no queue).
type QueueStats struct {
	Published, Confirmed, Failed, Indeterminate, Returned          uint64
	Consumed, Batches, Acked, Requeued, Redelivered, Retried, Dead uint64
}

// QueueSource is where the queue's counters and backlog are read at
// scrape time.
type QueueSource struct {
	Stats func() QueueStats
	// Backlog is the messages ready in the order queue (the consumers' lag).
	Backlog func(ctx context.Context) (int, error)
}

type queueCounter struct {
	desc *prometheus.Desc
	get  func(QueueStats) uint64
}

func queueDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_queue_"+name, help, nil, nil)
}

var queueCounters = []queueCounter{
	{queueDesc("published_total", "Orders handed to the broker."), func(s QueueStats) uint64 { return s.Published }},
	{queueDesc("confirmed_total", "Publishes the broker confirmed."), func(s QueueStats) uint64 { return s.Confirmed }},
	{queueDesc("publish_failed_total", "Publishes that certainly failed: full, disconnected, nacked or returned."), func(s QueueStats) uint64 { return s.Failed }},
	{queueDesc("publish_indeterminate_total", "Publishes whose confirm never came (the relay settles them)."), func(s QueueStats) uint64 { return s.Indeterminate }},
	{queueDesc("returned_total", "Publishes the broker returned as unroutable."), func(s QueueStats) uint64 { return s.Returned }},
	{queueDesc("consumed_total", "Deliveries the consumer received."), func(s QueueStats) uint64 { return s.Consumed }},
	{queueDesc("consumer_batches_total", "Transactions the consumer committed."), func(s QueueStats) uint64 { return s.Batches }},
	{queueDesc("acked_total", "Deliveries acknowledged after their transaction committed."), func(s QueueStats) uint64 { return s.Acked }},
	{queueDesc("requeued_total", "Deliveries returned to the queue after a failed transaction."), func(s QueueStats) uint64 { return s.Requeued }},
	{queueDesc("redelivered_total", "Deliveries the broker marked redelivered."), func(s QueueStats) uint64 { return s.Redelivered }},
	{queueDesc("retried_total", "Batches written again after a database outage."), func(s QueueStats) uint64 { return s.Retried }},
	{queueDesc("dead_lettered_total", "Deliveries dead-lettered (recorded as failed orders, units returned)."), func(s QueueStats) uint64 { return s.Dead }},
}

var queueBacklogDesc = queueDesc("backlog_messages", "Messages ready in the order queue: the consumers' lag.")

type queueCollector struct{ src *QueueSource }

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, q := range queueCounters {
		ch <- q.desc
	}
	ch <- queueBacklogDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Stats != nil {
		st := c.src.Stats()
		for _, q := range queueCounters {
			ch <- prometheus.MustNewConstMetric(q.desc, prometheus.CounterValue, float64(q.get(st)))
		}
	}
	if c.src.Backlog != nil {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		n, err := c.src.Backlog(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(queueBacklogDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(queueBacklogDesc, prometheus.GaugeValue, float64(n))
	}
}

// Route returns the timer of one route pattern (the http server's
// RouteTimer): one histogram child resolved once, observed per request.
func (m *Metrics) Route(pattern string) func(time.Duration) {
	h := m.routes.WithLabelValues(pattern)
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// Commit is the group-commit writer's hook: one transaction of orders
// reservations took d and failed with err.
func (m *Metrics) Commit(orders int, d time.Duration, err error) {
	m.batchSize.Observe(float64(orders))
	m.commitDur.Observe(d.Seconds())
	if err != nil {
		m.commitErrs.Inc()
	}
}
