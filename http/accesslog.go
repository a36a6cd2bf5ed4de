package http

import (
	"context"
	"log/slog"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The access log, affordable at tens of thousands of requests a second:
// one line for every 5xx and every slow request (at least SlowRequest),
// for the first clientErrorLines 4xx of each route each second other than
// the flood's own answers (409 and 429), one in Sample of the rest, and
// once a second a summary line per route that had traffic: its count, by
// status class, the 4xx left without a line, and its p99. Anyone can send
// 4xx requests: 2 000 bad purchases were 2 003 lines in 1.2 s. A request not given a line costs a few atomic adds and no
// allocation (BenchmarkPurchaseSoldOut).

// Access log defaults.
const (
	// AccessLogSampleDefault is how many requests that went well share
	// one line.
	AccessLogSampleDefault = 1000
	// SlowRequest is the latency from which every request gets a line:
	// the purchase latency alert's p99 threshold.
	SlowRequest = 200 * time.Millisecond
	// accessSummaryEvery is the summary's period.
	accessSummaryEvery = time.Second
	// clientErrorLines bounds a route's 4xx lines per summary period;
	// the summary counts the rest (unlogged_4xx).
	clientErrorLines = 20
)

// AccessLog counts and samples the requests of the Servers it is given to
// (Config.AccessLog). Close stops its summary.
type AccessLog struct {
	log    *slog.Logger
	sample uint64
	routes atomic.Pointer[map[string]*routeStats]
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// NewAccessLog logs to logger, one line per sample requests that went
// well (0: none, only those that went wrong or were slow), and starts the
// once-a-second summary.
func NewAccessLog(logger *slog.Logger, sample int) *AccessLog {
	return newAccessLog(logger, sample, accessSummaryEvery)
}

// newAccessLog is NewAccessLog with the summary's period; without one,
// only summarize writes it (tests).
func newAccessLog(logger *slog.Logger, sample int, every time.Duration) *AccessLog {
	a := &AccessLog{log: logger, sample: uint64(max(sample, 0))}
	a.routes.Store(&map[string]*routeStats{})
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	if every <= 0 {
		return a
	}
	a.done.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				a.summarize()
				return
			case <-t.C:
				a.summarize()
			}
		}
	})
	return a
}

// Close writes the last summary and stops.
func (a *AccessLog) Close() error {
	a.stop()
	a.done.Wait()
	return nil
}

// register adds the routes' patterns; only NewServer calls it, before
// serving, so the map is read without a lock.
func (a *AccessLog) register(patterns []string) {
	m := map[string]*routeStats{}
	for k, v := range *a.routes.Load() {
		m[k] = v
	}
	for _, p := range append(patterns, unmatchedRoute) {
		if m[p] == nil {
			m[p] = &routeStats{}
		}
	}
	a.routes.Store(&m)
}

const unmatchedRoute = "unmatched"

// routeStats is one route's counts since the last summary.
type routeStats struct {
	sampled  atomic.Uint64 // requests that went well, for the 1 in Sample
	errLines atomic.Uint64 // 4xx given a line this period (clientErrorLines)
	classes  [6]atomic.Uint64
	buckets  [latencyBuckets]atomic.Uint64
}

// observe counts one request of the route and says whether it gets a
// line, and whether that line is one of a sample.
func (a *AccessLog) observe(pattern string, status int, d time.Duration) (line, sampled bool) {
	st := (*a.routes.Load())[pattern]
	if st == nil {
		st = (*a.routes.Load())[unmatchedRoute]
	}
	st.classes[min(max(status/100, 0), 5)].Add(1)
	st.buckets[latencyBucket(d)].Add(1)
	switch {
	case status >= 500, d >= SlowRequest:
		return true, false
	case status >= 400 && status != http.StatusConflict && status != http.StatusTooManyRequests:
		return st.errLines.Add(1) <= clientErrorLines, false
	}
	line = a.sample > 0 && st.sampled.Add(1)%a.sample == 0
	return line, line
}

// request logs one request's line, with the request id its answer
// carried (h is the answer's header), so a line can be matched to what the
// client saw: every answer has one, the early sold-out answer included.
func (a *AccessLog) request(r *http.Request, h http.Header, pattern string, status int, d time.Duration, sampled bool) {
	attrs := []slog.Attr{
		slog.String("method", r.Method), slog.String("route", pattern), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000),
	}
	if id := h[requestIDHeader]; len(id) == 1 {
		attrs = append(attrs, slog.String("request_id", id[0]))
	}
	if sampled {
		attrs = append(attrs, slog.Uint64("sample", a.sample))
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// summarize logs, for each route with traffic since the last call, its
// count by status class and its p99, and starts the counts again.
func (a *AccessLog) summarize() {
	for pattern, st := range *a.routes.Load() {
		var classes [6]uint64
		var n uint64
		for i := range st.classes {
			classes[i] = st.classes[i].Swap(0)
			n += classes[i]
		}
		var buckets [latencyBuckets]uint64
		var m uint64
		for i := range st.buckets {
			buckets[i] = st.buckets[i].Swap(0)
			m += buckets[i]
		}
		errLines := st.errLines.Swap(0)
		if n == 0 {
			continue
		}
		a.log.LogAttrs(context.Background(), slog.LevelInfo, "requests", slog.String("route", pattern),
			slog.Uint64("count", n), slog.Uint64("status_1xx", classes[1]), slog.Uint64("status_2xx", classes[2]),
			slog.Uint64("status_3xx", classes[3]), slog.Uint64("status_4xx", classes[4]), slog.Uint64("status_5xx", classes[5]),
			slog.Uint64("unlogged_4xx", errLines-min(errLines, clientErrorLines)),
			slog.Float64("p99_ms", float64(quantile(buckets[:], m, 0.99).Microseconds())/1000))
	}
}

// Latencies are counted in buckets four to each power of two of
// microseconds, so a p99 read from them is high by at most a fifth.
const latencyBuckets = 128

func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	n := bits.Len64(us) // at least 3
	return min((n-2)*4+int(us>>(n-3)&3), latencyBuckets-1)
}

// latencyUpper is the upper bound of bucket i.
func latencyUpper(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	return time.Duration(uint64(5+i%4)<<(i/4-1)) * time.Microsecond
}

// quantile is the upper bound of the bucket holding the q-th of n counts.
func quantile(buckets []uint64, n uint64, q float64) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint64(float64(n)*q + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range buckets {
		if seen += c; seen >= rank {
			return latencyUpper(i)
		}
	}
	return latencyUpper(len(buckets) - 1)
}

// statusWriter remembers the status a handler answered; pooled, so a
// request without a line allocates nothing for it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var statusWriters = sync.Pool{New: func() any { return new(statusWriter) }}

// newStatusWriter wraps w to remember the status; finish recycles it.
func newStatusWriter(w http.ResponseWriter) *statusWriter {
	sw := statusWriters.Get().(*statusWriter)
	sw.ResponseWriter, sw.status = w, 0
	return sw
}

// finish counts the request sw answered in the access log, under its route
// pattern and with its latency d (serveHTTP times it once for this and the
// route's histogram), gives it a line if it earns one, and recycles sw.
// Event streams never come here: their length is a guest watching.
func (a *AccessLog) finish(sw *statusWriter, r *http.Request, pattern string, d time.Duration) {
	a.record(r, sw.ResponseWriter, pattern, cmpStatus(sw.status), d)
	sw.ResponseWriter = nil
	statusWriters.Put(sw)
}

// record counts a request answered on w with status in d, and gives it a
// line if it earns one.
func (a *AccessLog) record(r *http.Request, w http.ResponseWriter, pattern string, status int, d time.Duration) {
	if line, sampled := a.observe(pattern, status, d); line {
		a.request(r, w.Header(), pattern, status, d, sampled)
	}
}

// cmpStatus is the status of an answer whose handler wrote nothing: 200.
func cmpStatus(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}
