package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestRecorderSeries: each second counts the requests due in it and the
// answers that came in it, with the second's own latency percentiles, the
// purchases' apart.
func TestRecorderSeries(t *testing.T) {
	start := time.Now().Add(-2500 * time.Millisecond) // the run began 2.5 s ago
	r := newRecorder(start)
	// Due at 0.5 s, answered now (2.5 s): due in second 0, answered in 2.
	r.record(epPurchase, start.Add(500*time.Millisecond), Response{Status: 409, Code: "sold_out"}, nil)
	r.record(epView, start.Add(2400*time.Millisecond), Response{Status: 200}, nil)
	r.record(epPurchase, start.Add(2400*time.Millisecond), Response{Status: 202}, nil)
	r.record(epToken, start.Add(2400*time.Millisecond), Response{Status: 429, Code: "rate_limited"}, nil)
	r.record(epPurchase, start.Add(2400*time.Millisecond), Response{Status: 503, Code: "unavailable"}, nil)
	// The records read the clock themselves: a loaded machine makes them
	// later than "now", so the latencies are bounded by the time taken.
	late := float64(time.Since(start)-2500*time.Millisecond) / float64(time.Millisecond)
	res := r.result("http://x", Burst(1), DefaultMix)
	if len(res.Series) != 3 {
		t.Fatalf("series of %d seconds, want 3: %+v", len(res.Series), res.Series)
	}
	s0, s2 := res.Series[0], res.Series[2]
	if s0.Sent != 1 || s0.Requests != 0 || s2.Sent != 4 || s2.Requests != 5 || s2.Accepted != 1 || s2.SoldOut != 1 || s2.Limited != 1 || s2.Errors != 1 {
		t.Errorf("second 0 %+v, second 2 %+v", s0, s2)
	}
	// The purchase due 2 s before its answer is the second's max and its
	// purchases' p99; the others took about 100 ms.
	near := func(got, want float64) bool { return got > want*0.97 && got < (want+late)*1.03 }
	if !near(s2.Max, 2000) || !near(s2.Purchase.P99, 2000) || !near(s2.P50, 100) || !near(s2.Purchase.P50, 100) {
		t.Errorf("second 2 latencies %+v, want max and purchase p99 ≈ 2000 ms, p50s ≈ 100", s2)
	}
	if res.Series[1] != (Second{}) {
		t.Errorf("second 1 %+v, want empty", res.Series[1])
	}
}

// TestDBLoad: counter samples become calls per second of the run, the
// peak is the busiest one-second window, the mean is over the whole
// watch; a watch shorter than a second has all its calls in its peak.
func TestDBLoad(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	l := dbLoad("u", start, []dbSample{
		{at(0), 100, 0},
		{at(500), 120, 5},
		{at(1000), 150, 10},
		{at(2000), 350, 30},
		{at(3000), 400, 40},
		{at(3010), 410, 40}, // the last second, cut short
	})
	if fmt.Sprint(l.Calls) != "[50 200 50 10]" || fmt.Sprint(l.Orders) != "[10 20 10 0]" {
		t.Errorf("per second: calls %v, orders %v", l.Calls, l.Orders)
	}
	// The busiest window starts at 1 s; the one from 0.5 s has 30+100.
	if l.PeakCalls != 200 || l.PeakOrders != 20 || l.Seconds != 3.01 {
		t.Errorf("peaks %v calls, %v orders over %v s; want 200, 20, 3.01", l.PeakCalls, l.PeakOrders, l.Seconds)
	}
	if want := 310.0 / 3.01; l.MeanCalls < want-0.01 || l.MeanCalls > want+0.01 {
		t.Errorf("mean %v, want %v", l.MeanCalls, want)
	}
	short := dbLoad("u", start, []dbSample{{at(0), 0, 0}, {at(250), 30, 3}, {at(500), 40, 4}})
	if short.PeakCalls != 40 || short.PeakOrders != 4 || short.MeanCalls != 80 || fmt.Sprint(short.Calls) != "[40]" {
		t.Errorf("half a second: %+v", short)
	}
	if !quiet([]dbSample{{at(0), 1, 7}, {at(600), 5, 7}, {at(1100), 9, 7}}, time.Second) ||
		quiet([]dbSample{{at(0), 1, 6}, {at(600), 5, 7}, {at(1100), 9, 7}}, time.Second) ||
		quiet([]dbSample{{at(600), 5, 7}, {at(1100), 9, 7}}, time.Second) {
		t.Error("quiet: want true only when no order was placed over a whole second of samples")
	}
}

// metricsServer serves a Prometheus text exposition.
func metricsServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestScrape: the database counters summed over their labels, and what
// the server sells from, read from its metrics; a server without them says so.
func TestScrape(t *testing.T) {
	url := metricsServer(t, `# TYPE flashsale_db_calls_total counter
flashsale_db_calls_total{op="place_orders",outcome="ok"} 12
flashsale_db_calls_total{op="sale",outcome="ok"} 30
# TYPE flashsale_db_orders_placed_total counter
flashsale_db_orders_placed_total{result="held"} 7
flashsale_db_orders_placed_total{result="sold_out"} 2
# TYPE flashsale_selling gauge
flashsale_selling{from="db"} 1
flashsale_selling{from="engine"} 0
flashsale_selling{from="none"} 0
`)
	s, err := scrapeDB(t.Context(), http.DefaultClient, url)
	if err != nil || s.calls != 42 || s.ordered != 9 {
		t.Errorf("scrapeDB = %+v, %v; want 42 calls, 9 ordered", s, err)
	}
	if from, err := Selling(t.Context(), url); from != "db" || err != nil {
		t.Errorf("Selling = %q, %v; want db", from, err)
	}
	bare := metricsServer(t, "# TYPE go_goroutines gauge\ngo_goroutines 5\n")
	if _, err := scrapeDB(t.Context(), http.DefaultClient, bare); err == nil || !strings.Contains(err.Error(), dbCallsFamily) {
		t.Errorf("scrapeDB of a server without the counter: %v", err)
	}
	if _, err := Selling(t.Context(), bare); err == nil || !strings.Contains(err.Error(), "db mode") {
		t.Errorf("Selling of a server without db mode: %v", err)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {0.3, 0.4}, {1, 1}, {1.01, 2}, {3.8, 4}, {5, 6}, {7, 8}, {9, 10}, {115, 200}, {2000, 2000},
	} {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	for _, tt := range []struct{ n, want int }{{0, 1}, {10, 1}, {11, 2}, {52, 5}, {61, 10}, {600, 60}} {
		if got := niceStep(tt.n); got != tt.want {
			t.Errorf("niceStep(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

// TestLineChart: a path per series with a point per value, inside the
// plot, the y axis topped at a round number, and names escaped.
func TestLineChart(t *testing.T) {
	svg := string(lineChart("t <1>", "per second", []line{
		{name: "a & b", color: "#000", values: []float64{0, 5, 38}},
		{name: "lone", color: "#111", values: []float64{3}},
	}))
	paths := regexp.MustCompile(`<path class="series" data-series="([^"]*)" data-points="(\d+)"[^>]* d="([^"]*)"`).FindAllStringSubmatch(svg, -1)
	if len(paths) != 2 || paths[0][1] != "a &amp; b" || paths[0][2] != "3" || paths[1][2] != "1" {
		t.Fatalf("paths %q in\n%s", paths, svg)
	}
	if got := strings.Count(paths[0][3], "M") + strings.Count(paths[0][3], "L"); got != 3 {
		t.Errorf("d %q has %d points, want 3", paths[0][3], got)
	}
	for _, want := range []string{`>40</text>`, `>0</text>`, "seconds since the first arrival", "per second", "t &lt;1&gt;", "<circle"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "<1>") {
		t.Error("the title is not escaped")
	}
}

// TestWriteHTML: the page has its charts, its verdict and a policy that
// lets it fetch nothing; a broken invariant is on top.
func TestWriteHTML(t *testing.T) {
	res := &Result{Target: "http://x", Series: []Second{{Sent: 3, Requests: 2}, {Sent: 1, Requests: 2}},
		Endpoints: []EndpointStats{{Name: "purchase", Count: 4, Mean: 1, P50: 1, P99: 2, Max: 3}},
		Outcomes:  []Outcome{{Endpoint: "purchase", Status: 202, Count: 1}}, Funnel: Funnel{Admission: 1, Stock: 2, Orders: 1}}
	rep := &Report{Target: "http://x", Shape: "burst", Mix: DefaultMix.String(), Rounds: []*Result{res},
		Checks: []*Check{{Invariants: []Invariant{{Name: InvOversold, Detail: "night " + testenv.Night(0) + ": held 3 + sold 0 > stock 2"}}}}}
	rep.Summarize()
	var b strings.Builder
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`content="default-src 'none'; style-src 'unsafe-inline'"`, `data-ok="false"`, "INVARIANT BROKEN",
		"night " + testenv.Night(0) + ": held 3 &#43; sold 0 &gt; stock 2", `data-series="answered" data-points="2"`, `<rect class="bar" data-value="4"`,
		"No database figures"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://"+"cdn") || strings.Contains(page, "src=") {
		t.Error("the page has a script or fetches something")
	}
}
