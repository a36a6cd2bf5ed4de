package bench

import (
	"context"
	"fmt"
	"github.com/flashsale/flashsale/metrics/family"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The server's own counters of its database calls, which DBLoad reads.
const (
	// dbCallsFamily counts every call the server made to its store,
	// whatever the operation; a group commit, a consumer's batch of up to
	// 256 orders or the reaper's batch of expired holds is one call.
	dbCallsFamily = family.DBCalls
	// dbOrdersFamily counts the reservations the database's conditional
	// insert was asked to place (held, duplicate, sold out, ...).
	dbOrdersFamily = family.DBOrdersPlaced
)

// DBLoad is the database load of one run, second by second, as the
// server's own Prometheus counters tell it: read from its /metrics every
// quarter of a second from the first arrival until, after the load, no
// order has been placed for a second. Calls is what the comparison quotes as the
// database's QPS: calls from the server to its store, so a batch is one
// call however many rows it writes (the database's own statement count
// would be higher on the queued paths, not lower).
type DBLoad struct {
	Source  string    `json:"source"`       // the metrics URL
	Seconds float64   `json:"seconds"`      // how long the counters were watched
	Calls   []float64 `json:"calls_per_s"`  // per second of the run
	Orders  []float64 `json:"orders_per_s"` // reservations placed per second
	// The peaks are the most in one second (a window sliding by a quarter
	// of a second), the means over the whole watch.
	PeakCalls  float64 `json:"peak_calls_per_s"`
	MeanCalls  float64 `json:"mean_calls_per_s"`
	PeakOrders float64 `json:"peak_orders_per_s"`
	MeanOrders float64 `json:"mean_orders_per_s"`
}

// dbSample is the two counters at one moment.
type dbSample struct {
	at             time.Time
	calls, ordered float64
}

// scrape reads the Prometheus text exposition at url.
func scrape(ctx context.Context, hc *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return fams, nil
}

// scrapeDB reads the two counters from url.
func scrapeDB(ctx context.Context, hc *http.Client, url string) (dbSample, error) {
	fams, err := scrape(ctx, hc, url)
	if err != nil {
		return dbSample{}, err
	}
	s := dbSample{at: time.Now()}
	calls, ok := fams[dbCallsFamily]
	if !ok {
		return dbSample{}, fmt.Errorf("GET %s: no %s (not a flashsale server?)", url, dbCallsFamily)
	}
	for _, m := range calls.GetMetric() {
		s.calls += m.GetCounter().GetValue()
	}
	for _, m := range fams[dbOrdersFamily].GetMetric() {
		s.ordered += m.GetCounter().GetValue()
	}
	return s, nil
}

// How the counters are watched: read every dbTick, and after the load
// until no order has been placed for dbQuiet (the queued paths write
// their orders after the 202s), at most dbSettleMax.
const (
	dbTick      = 250 * time.Millisecond
	dbQuiet     = time.Second
	dbSettleMax = 30 * time.Second
)

// watchDB reads the counters at url now and then every dbTick until
// stop, which waits for the orders to stop being placed and returns the
// load of the run that began at start (nil and why when the counters
// could not be read at all). A scrape that fails is skipped.
func watchDB(ctx context.Context, url string) (stop func(start time.Time) (*DBLoad, string)) {
	hc := &http.Client{Timeout: 2 * time.Second} // its own connections: never queued behind the load
	first, err := scrapeDB(ctx, hc, url)
	if err != nil {
		return func(time.Time) (*DBLoad, string) { return nil, err.Error() }
	}
	var (
		mu      sync.Mutex
		samples = []dbSample{first}
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(dbTick)
		defer t.Stop()
		var loadEnded time.Time
		ended := done
		for {
			select {
			case <-t.C:
			case <-ended:
				ended, loadEnded = nil, time.Now() // the load is over: settle
				continue
			case <-ctx.Done():
				return
			}
			s, err := scrapeDB(ctx, hc, url)
			mu.Lock()
			if err == nil {
				samples = append(samples, s)
			}
			settled := !loadEnded.IsZero() && (time.Since(loadEnded) > dbSettleMax || quiet(samples, dbQuiet))
			mu.Unlock()
			if settled {
				return
			}
		}
	})
	return func(start time.Time) (*DBLoad, string) {
		close(done)
		wg.Wait()
		hc.CloseIdleConnections()
		mu.Lock()
		defer mu.Unlock()
		return dbLoad(url, start, samples), ""
	}
}

// quiet reports whether no order was placed over the samples of the last d.
func quiet(samples []dbSample, d time.Duration) bool {
	last := samples[len(samples)-1]
	for i := len(samples) - 2; i >= 0; i-- {
		if samples[i].ordered != last.ordered {
			return false
		}
		if last.at.Sub(samples[i].at) >= d {
			return true
		}
	}
	return false
}

// dbLoad turns counter samples into the load: per second of the run the
// calls and orders in it (the counters interpolated between samples at
// the seconds' edges; the last second may be cut short), the peak as the
// most in any one-second window starting at a sample (all of them when
// the samples span less than a second), and the mean over the whole span.
func dbLoad(url string, start time.Time, samples []dbSample) *DBLoad {
	l := &DBLoad{Source: url}
	if len(samples) < 2 {
		return l
	}
	first, last := samples[0], samples[len(samples)-1]
	span := last.at.Sub(first.at)
	l.Seconds = span.Seconds()
	for k := 0; start.Add(time.Duration(k) * time.Second).Before(last.at); k++ {
		a := start.Add(time.Duration(k) * time.Second)
		if a.Before(first.at) {
			a = first.at
		}
		b := start.Add(time.Duration(k+1) * time.Second)
		if b.After(last.at) {
			b = last.at
		}
		ca, oa := counterAt(samples, a)
		cb, ob := counterAt(samples, b)
		l.Calls, l.Orders = append(l.Calls, cb-ca), append(l.Orders, ob-oa)
	}
	for _, s := range samples {
		end := s.at.Add(time.Second)
		if end.After(last.at) {
			if span >= time.Second {
				break
			}
			end = last.at // under a second in all: its busiest second holds everything
		}
		ce, oe := counterAt(samples, end)
		l.PeakCalls, l.PeakOrders = max(l.PeakCalls, ce-s.calls), max(l.PeakOrders, oe-s.ordered)
		if span < time.Second {
			break
		}
	}
	if span > 0 {
		l.MeanCalls, l.MeanOrders = (last.calls-first.calls)/span.Seconds(), (last.ordered-first.ordered)/span.Seconds()
	}
	return l
}

// counterAt is both counters at t, interpolated linearly between the
// samples around it (the first's or the last's outside them).
func counterAt(samples []dbSample, t time.Time) (calls, ordered float64) {
	if !t.After(samples[0].at) {
		return samples[0].calls, samples[0].ordered
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.After(b.at) {
			continue
		}
		f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
		return a.calls + f*(b.calls-a.calls), a.ordered + f*(b.ordered-a.ordered)
	}
	last := samples[len(samples)-1]
	return last.calls, last.ordered
}

// sellingFamily is the server's gauge of what it sells from, 1 for one of
// engine, db and none; only a server in the breaker's db mode has it.
const sellingFamily = family.Selling

// Selling reads from the server's metrics at url what it sells from now:
// "engine", "db" or "none" (between the two). A server without the db
// mode has no such gauge: an error says so.
func Selling(ctx context.Context, url string) (string, error) {
	fams, err := scrape(ctx, &http.Client{Timeout: 2 * time.Second}, url)
	if err != nil {
		return "", err
	}
	f, ok := fams[sellingFamily]
	if !ok {
		return "", fmt.Errorf("GET %s: no %s: the server is not in the breaker's db mode", url, sellingFamily)
	}
	for _, m := range f.GetMetric() {
		if m.GetGauge().GetValue() != 1 {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "from" {
				return l.GetValue(), nil
			}
		}
	}
	return "", fmt.Errorf("GET %s: %s names nothing", url, sellingFamily)
}
