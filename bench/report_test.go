package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestRecorder: latencies land in the endpoint's histogram from the
// scheduled send, the percentiles read back within the histogram's three
// digits, and outcomes and the funnel count what they should.
func TestRecorder(t *testing.T) {
	now := time.Now()
	r := newRecorder(now)
	for i := 1; i <= 1000; i++ { // purchases that waited 1 ms … 1 s
		r.record(epPurchase, time.Now().Add(-time.Duration(i)*time.Millisecond), Response{Status: 409, Code: "sold_out"}, nil)
	}
	r.record(epPurchase, now, Response{Status: 202}, nil)
	r.record(epToken, now, Response{Status: 429, Code: "rate_limited"}, nil)
	r.record(epPay, now, Response{Status: 200}, nil)
	r.record(epView, now, Response{}, errTest)
	r.dropped()
	res := r.result("http://x", Burst(1), DefaultMix)

	if res.Requests != 1004 {
		t.Errorf("requests = %d, want 1004 (a dropped connection is no request answered)", res.Requests)
	}
	var p Outcome
	for _, o := range res.Outcomes {
		if o.Endpoint == "purchase" && o.Code == "sold_out" {
			p = o
		}
	}
	if p.Count != 1000 || p.Status != 409 {
		t.Errorf("purchase sold_out outcome = %+v", p)
	}
	var e EndpointStats
	for _, x := range res.Endpoints {
		if x.Name == "purchase" {
			e = x
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.01+0.5 }
	if e.Count != 1001 || !near(e.P50, 500) || !near(e.P90, 900) || !near(e.P99, 990) || !near(e.P999, 999) || !near(e.Max, 1000) {
		t.Errorf("purchase latency = %+v, want p50 ≈ 500 ms, p90 ≈ 900, p99 ≈ 990, p99.9 ≈ 999, max ≈ 1000", e)
	}
	if want := (Funnel{Admission: 1, Stock: 1000, Orders: 1, Paid: 1}); res.Funnel != want {
		t.Errorf("funnel = %+v, want %+v", res.Funnel, want)
	}
	found := map[string]bool{}
	for _, o := range res.Outcomes {
		found[o.Endpoint+" "+o.Code] = true
	}
	if !found["view transport"] || !found["broken dropped"] {
		t.Errorf("outcomes %+v lack the transport error or the dropped connection", res.Outcomes)
	}
}

var errTest = errTestT{}

type errTestT struct{}

func (errTestT) Error() string { return "connection refused" }

// TestSummarize: medians over rounds, ratios to the ceiling's medians,
// and a report that says which invariant broke.
func TestSummarize(t *testing.T) {
	round := func(tput, p99 float64) *Result {
		return &Result{Throughput: tput, Endpoints: []EndpointStats{{Name: "purchase", Count: 10, P50: 1, P90: 2, P99: p99, P999: p99, Max: p99}}}
	}
	rep := &Report{
		Target: "http://x", Shape: "burst", Mix: DefaultMix.String(), Ceiling: "ceiling",
		Rounds:   []*Result{round(900, 30), round(800, 10), round(1000, 20)},
		Ceilings: []*Result{round(1000, 10), round(1000, 20), round(2000, 10)},
		Checks: []*Check{
			{Invariants: []Invariant{{Name: InvOversold, OK: true}}},
			{Invariants: []Invariant{{Name: InvOversold, OK: true}, {Name: InvLost, Detail: "order o1 (a 202 to g1) cannot be read by its owner"}}},
		},
	}
	rep.Summarize()
	if rep.Median.Throughput != 900 || rep.CeilingMedian.Throughput != 1000 || rep.Ratio.Throughput != 0.9 {
		t.Errorf("throughput median %v, ceiling %v, ratio %v; want 900, 1000, 0.9", rep.Median.Throughput, rep.CeilingMedian.Throughput, rep.Ratio.Throughput)
	}
	if got := rep.Ratio.Endpoints[0].P99; got != 2 {
		t.Errorf("p99 ratio = %v, want 20/10", got)
	}
	if rep.OK {
		t.Error("OK with a broken invariant")
	}
	var b strings.Builder
	rep.WriteText(&b)
	for _, want := range []string{"0.90× the ceiling", "BROKEN  lost_202: order o1", "INVARIANT BROKEN", "p99 ×ceil"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
