package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// endpoint is a kind of request the load generator sends.
type endpoint int

// The endpoints, in the order a guest meets them. Broken is every request
// a broken client sends, kept apart so its errors do not colour the
// purchase's latency.
const (
	epView endpoint = iota
	epChallenge
	epToken
	epPurchase
	epOrder
	epPay
	epCancel
	epBroken
	endpoints
)

var endpointNames = [endpoints]string{"view", "challenge", "token", "purchase", "order", "pay", "cancel", "broken"}

func (e endpoint) String() string { return endpointNames[e] }

// Latencies are recorded in microseconds, from 1 µs to a minute, to three
// significant figures (HDR histograms: a fixed few kilobytes, any count).
const (
	histMin, histMax = 1, int64(time.Minute / time.Microsecond)
	histDigits       = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// secondDigits is the precision of each second's own histograms (the
// time series): two significant figures, 1 %, keep them at about 20 kB
// a second where three would take 140.
const secondDigits = 2

func newSecondHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, secondDigits) }

// outcome is one endpoint's answers of one status and code; status 0 is a
// transport error (code "transport") or a connection the client dropped on
// purpose (code "dropped").
type outcome struct {
	ep     endpoint
	status int
	code   string
}

// Accepted is one 202 as the client saw it: the order it names, for whom,
// under which idempotency key (empty: none), and of which slot (a slot
// sale's; empty for a stay).
type Accepted struct {
	OrderID, User, Key string
	Kind               Kind
	Slot               string
}

// recorder collects one run's measurements. One mutex: a few thousand
// records a second are nothing beside the HTTP exchange each one measures.
type recorder struct {
	start time.Time

	mu       sync.Mutex
	last     time.Time // the latest answer
	hist     [endpoints]*hdrhistogram.Histogram
	window   *hdrhistogram.Histogram // since the last progress line
	outcomes map[outcome]int
	seconds  []Second
	// perSecond are each second's latencies, every request's and the
	// purchases', by the second the answer came in, like seconds.
	perSecond []secondHists
	accepted  []Accepted
	unknown   int // purchases whose answer was lost: they may have bought
	lag       time.Duration
	sessions  int
}

// Second is one second of a run. Sent counts the requests due in it (by
// the schedule: a session's first request at its arrival, each next one
// when the previous answer came), so a generator running late cannot hide
// them; everything else is the answers that came in during it.
type Second struct {
	Sent     int `json:"sent"`
	Requests int `json:"requests"` // answered
	Accepted int `json:"accepted"`
	SoldOut  int `json:"sold_out"`
	Limited  int `json:"rate_limited"`
	Errors   int `json:"errors_5xx"`
	// Latencies of the answers of this second, in milliseconds from each
	// request's scheduled send, to two significant figures: every
	// request's, and the purchases' alone (0 when none came).
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
	Purchase struct {
		P50 float64 `json:"p50_ms"`
		P99 float64 `json:"p99_ms"`
	} `json:"purchase"`
}

type secondHists struct{ all, purchase *hdrhistogram.Histogram }

func newRecorder(start time.Time) *recorder {
	r := &recorder{start: start, window: newHist(), outcomes: map[outcome]int{}}
	for i := range r.hist {
		r.hist[i] = newHist()
	}
	return r
}

// record notes a request to ep meant to be sent at intended (not when it
// was sent: a request that waited for the generator or for a connection
// waited for the server) that ended now with resp or err.
func (r *recorder) record(ep endpoint, intended time.Time, resp Response, err error) {
	now := time.Now()
	us := max(histMin, min(histMax, now.Sub(intended).Microseconds()))
	o := outcome{ep: ep, status: resp.Status, code: resp.Code}
	if err != nil {
		o = outcome{ep: ep, code: "transport"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.After(r.last) {
		r.last = now
	}
	r.hist[ep].RecordValue(us)
	r.window.RecordValue(us)
	r.outcomes[o]++
	r.second(intended).Sent++
	s := r.second(now)
	s.Requests++
	h := &r.perSecond[int(now.Sub(r.start)/time.Second)]
	h.all.RecordValue(us)
	if ep == epPurchase {
		h.purchase.RecordValue(us)
	}
	switch {
	case o.status == 202 && ep == epPurchase:
		s.Accepted++
	case o.code == "sold_out":
		s.SoldOut++
	case o.status == 429:
		s.Limited++
	case o.status >= 500:
		s.Errors++
	}
}

// second is the second of the run t falls in (the first for a time
// before the start), grown as the run goes on. r.mu is held.
func (r *recorder) second(t time.Time) *Second {
	sec := max(0, int(t.Sub(r.start)/time.Second))
	for len(r.seconds) <= sec {
		r.seconds = append(r.seconds, Second{})
		r.perSecond = append(r.perSecond, secondHists{newSecondHist(), newSecondHist()})
	}
	return &r.seconds[sec]
}

// dropped notes a request the client cut off on purpose: no answer, no latency.
func (r *recorder) dropped() {
	r.mu.Lock()
	r.outcomes[outcome{ep: epBroken, code: "dropped"}]++
	r.mu.Unlock()
}

func (r *recorder) accept(a Accepted) {
	r.mu.Lock()
	r.accepted = append(r.accepted, a)
	r.mu.Unlock()
}

func (r *recorder) lost() {
	r.mu.Lock()
	r.unknown++
	r.mu.Unlock()
}

// late notes how far behind its schedule the generator started a session.
func (r *recorder) late(d time.Duration) {
	r.mu.Lock()
	r.lag = max(r.lag, d)
	r.sessions++
	r.mu.Unlock()
}

// progress is the line a terminal shows each second, and resets the
// window the current p99 is read from.
func (r *recorder) progress() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t Second
	for _, s := range r.seconds {
		t.Requests += s.Requests
		t.Accepted += s.Accepted
		t.SoldOut += s.SoldOut
		t.Limited += s.Limited
		t.Errors += s.Errors
	}
	p99 := float64(r.window.ValueAtQuantile(99)) / 1000
	r.window.Reset()
	return fmt.Sprintf("%5.1fs  sent %d  accepted %d  sold out %d  429 %d  5xx %d  p99 %.1f ms",
		time.Since(r.start).Seconds(), t.Requests, t.Accepted, t.SoldOut, t.Limited, t.Errors, p99)
}

// Result is one run's measurements.
type Result struct {
	Target   string `json:"target"`
	Shape    string `json:"shape"`
	Mix      string `json:"mix"`
	Sessions int    `json:"sessions"`
	Requests int    `json:"requests"`
	// Seconds is from the first arrival to the last answer.
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput"` // requests answered per second
	// LagMS is how late the generator started the latest session against
	// its schedule; the wait is in that session's latency either way.
	LagMS     float64         `json:"lag_ms"`
	Endpoints []EndpointStats `json:"endpoints"`
	Outcomes  []Outcome       `json:"outcomes"`
	Funnel    Funnel          `json:"funnel"`
	// Series is the run second by second, from the first arrival.
	Series []Second `json:"series"`
	// DB is the server's database calls second by second, when its
	// metrics could be read (nil: they could not; DBMissing says why).
	DB        *DBLoad `json:"db,omitempty"`
	DBMissing string  `json:"db_missing,omitempty"`

	// Loop and Conns are a closed loop's (empty for an open shape), with
	// the sessions it finished and the 202s it got, per second.
	Loop         string  `json:"loop,omitempty"`
	Conns        int     `json:"conns,omitempty"`
	SessionRate  float64 `json:"sessions_per_s,omitempty"`
	AcceptedRate float64 `json:"accepted_per_s,omitempty"`

	// Accepted is every 202, and Unknown the purchases whose answer was
	// lost, for the invariant check.
	Accepted []Accepted `json:"-"`
	Unknown  int        `json:"unknown_outcomes"`
	// Slots are a slot sale's slots the purchases named (Config.Slots),
	// in the sale's order, which is its audit's; none for a stay.
	Slots []string `json:"slots,omitempty"`
	// Vehicles are a seats sale's vehicles per departure (Slots are its
	// departures; Config.Vehicles); none for any other kind.
	Vehicles []int `json:"vehicles,omitempty"`
}

// units are the slot of each of the audit's units, in order: a slot
// sale's slots, a seats sale's departures once per vehicle; none for a
// stay.
func (r *Result) units() []string {
	if len(r.Vehicles) == 0 {
		return r.Slots
	}
	var units []string
	for i, d := range r.Slots {
		for j := 0; i < len(r.Vehicles) && j < r.Vehicles[i]; j++ {
			units = append(units, d)
		}
	}
	return units
}

// EndpointStats is one endpoint's latency, in milliseconds from each
// request's scheduled send.
type EndpointStats struct {
	Name  string  `json:"name"`
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// Outcome counts one endpoint's answers of one status and code.
type Outcome struct {
	Endpoint string `json:"endpoint"`
	Status   int    `json:"status"`
	Code     string `json:"code,omitempty"`
	Count    int    `json:"count"`
}

// Funnel is where purchases stopped: refused at admission (bad request,
// authentication, token, rate limit, overload), refused by the stock
// engine (sold out, over the user's limit), made into orders, paid.
type Funnel struct {
	Admission int `json:"admission"`
	Stock     int `json:"stock"`
	Orders    int `json:"orders"`
	Paid      int `json:"paid"`
}

func (r *recorder) result(target string, shape Shape, mix Mix) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &Result{
		Target: target, Shape: shape.String(), Mix: mix.String(), Sessions: r.sessions,
		LagMS: ms(r.lag), Series: slices.Clone(r.seconds),
		Accepted: slices.Clone(r.accepted), Unknown: r.unknown,
	}
	elapsed := max(0, r.last.Sub(r.start).Seconds())
	for e, h := range r.hist {
		n := h.TotalCount()
		res.Requests += int(n)
		if n == 0 {
			continue
		}
		q := func(p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
		res.Endpoints = append(res.Endpoints, EndpointStats{Name: endpoint(e).String(), Count: n, Mean: h.Mean() / 1000,
			P50: q(50), P90: q(90), P99: q(99), P999: q(99.9), Max: float64(h.Max()) / 1000})
	}
	for i, h := range r.perSecond {
		s := &res.Series[i]
		q := func(h *hdrhistogram.Histogram, p float64) float64 { return float64(h.ValueAtQuantile(p)) / 1000 }
		if h.all.TotalCount() > 0 {
			s.P50, s.P99, s.Max = q(h.all, 50), q(h.all, 99), float64(h.all.Max())/1000
		}
		if h.purchase.TotalCount() > 0 {
			s.Purchase.P50, s.Purchase.P99 = q(h.purchase, 50), q(h.purchase, 99)
		}
	}
	res.Seconds = elapsed
	if elapsed > 0 {
		res.Throughput = float64(res.Requests) / elapsed
	}
	for o, n := range r.outcomes {
		res.Outcomes = append(res.Outcomes, Outcome{Endpoint: o.ep.String(), Status: o.status, Code: o.code, Count: n})
		if o.ep == epPurchase || o.ep == epToken || o.ep == epChallenge {
			switch {
			case o.ep == epPurchase && o.status == 202:
				res.Funnel.Orders += n
			case o.ep == epPurchase && (o.code == "sold_out" || o.code == "limit_exceeded"):
				res.Funnel.Stock += n
			case o.status >= 400 && o.code != "sold_out":
				res.Funnel.Admission += n
			}
		}
		if o.ep == epPay && o.status == 200 {
			res.Funnel.Paid += n
		}
	}
	slices.SortFunc(res.Outcomes, func(a, b Outcome) int {
		return cmp.Or(cmp.Compare(slices.Index(endpointNames[:], a.Endpoint), slices.Index(endpointNames[:], b.Endpoint)),
			cmp.Compare(a.Status, b.Status), cmp.Compare(a.Code, b.Code))
	})
	return res
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// StatusText is how an outcome's status reads in the report.
func (o Outcome) StatusText() string {
	if o.Status == 0 {
		return "-"
	}
	return strconv.Itoa(o.Status)
}
