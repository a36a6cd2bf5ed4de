package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/bench"
)

// runBuiltBench runs the built binary's bench with args as a user would
// in CI (CI=true, output piped), fails the test if it fails or writes to
// stderr (no progress off a terminal), and returns what it printed.
func runBuiltBench(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench"}, args...)...)
	cmd.Env = append(os.Environ(), "CI=true")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench %q: %v\n%s\n%s", args, err, out.String(), errOut.String())
	}
	t.Logf("%s", out.String())
	if errOut.Len() > 0 {
		t.Errorf("progress or noise on stderr with CI=true and a pipe:\n%s", errOut.String())
	}
	return out.String()
}

// readJSON decodes the JSON file a bench wrote.
func readJSON[T any](t *testing.T, file string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// benchDOM is what TestBenchHTML reads from the rendered report.
type benchDOM struct {
	Traffic   map[string]int `json:"traffic"` // series -> points drawn
	Latency   map[string]int `json:"latency"`
	DB        map[string]int `json:"db"`
	Drawn     bool           `json:"drawn"` // every line has a length on screen
	XLabels   []string       `json:"xLabels"`
	YLabels   []string       `json:"yLabels"`
	XTicks    int            `json:"xTicks"`
	Bars      []int          `json:"bars"`
	BarWidths []float64      `json:"barWidths"`
	Verdict   string         `json:"verdict"`
	OKs       int            `json:"oks"`
	Resources int            `json:"resources"`
}

const benchDOMScript = `(() => {
  const points = p => (p.getAttribute('d').match(/[ML]/g) || []).length;
  const lines = fig => Object.fromEntries([...document.querySelectorAll(fig + ' path.series')].map(p => [p.dataset.series, points(p)]));
  const paths = [...document.querySelectorAll('figure.traffic path.series, figure.latency path.series')];
  return {
    traffic: lines('figure.traffic'), latency: lines('figure.latency'), db: lines('figure.db'),
    drawn: paths.length > 0 && paths.every(p => p.getTotalLength() > 0 && p.getBoundingClientRect().width > 100),
    xLabels: [...document.querySelectorAll('figure .x-label')].map(e => e.textContent),
    yLabels: [...document.querySelectorAll('figure .y-label')].map(e => e.textContent),
    xTicks: document.querySelectorAll('figure.traffic .x-tick').length,
    bars: [...document.querySelectorAll('svg.funnel rect.bar')].map(r => +r.dataset.value),
    barWidths: [...document.querySelectorAll('svg.funnel rect.bar')].map(r => r.getBoundingClientRect().width),
    verdict: document.getElementById('verdict').dataset.ok,
    oks: document.querySelectorAll('table.invariants td.ok').length,
    resources: performance.getEntriesByType('resource').length,
  };
})()`

// TestBenchHTML renders the HTML report of a real run (the built binary's
// bench --self, a short constant shape) and opens it in headless chromium:
// the charts are drawn with a point per second of the run on every line,
// their axes labelled, the funnel's bars are the run's funnel, the verdict
// says every invariant held, and the page fetched nothing at all.
func TestBenchHTML(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx := mustBrowser(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	htmlFile, jsonFile := filepath.Join(dir, "bench.html"), filepath.Join(dir, "bench.json")
	runBuiltBench(t, bin, "--self", "--shape", "constant", "--peak", "100", "--duration", "4s",
		"--stock", "30", "--hold", "2", "--think", "50ms", "--html", htmlFile, "--json", jsonFile)
	res := readJSON[bench.Report](t, jsonFile).Rounds[0]
	seconds := len(res.Series)
	if seconds < 4 || res.DB == nil {
		t.Fatalf("the run's series has %d seconds (want 4 or more), its database load %+v (%s)", seconds, res.DB, res.DBMissing)
	}

	var (
		mu       sync.Mutex
		requests []string
	)
	chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})
	page := "file://" + htmlFile
	runSteps(t, ctx, cdpDo(network.Enable, network.EnableParams{}), chromedp.Navigate(page), visible("#verdict"), visible("figure.traffic svg"))
	dom, err := chromedp.Run(ctx, chromedp.Evaluate[benchDOM](benchDOMScript))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d seconds; DOM %+v", seconds, dom)

	for _, name := range []string{"sent (due by the schedule)", "answered", "accepted (202)", "sold out", "429 rate limited", "5xx"} {
		if dom.Traffic[name] != seconds {
			t.Errorf("traffic chart: %q has %d points, want one per second of the run (%d)", name, dom.Traffic[name], seconds)
		}
	}
	for _, name := range []string{"purchase p50", "purchase p99", "every request p99"} {
		if dom.Latency[name] != seconds {
			t.Errorf("latency chart: %q has %d points, want %d", name, dom.Latency[name], seconds)
		}
	}
	if n := dom.DB["database calls"]; n != len(res.DB.Calls) || n < seconds-1 {
		t.Errorf("database chart: %d points, want the %d seconds the server's counters were read", n, len(res.DB.Calls))
	}
	if !dom.Drawn {
		t.Error("a line of the traffic or latency chart has no length on screen")
	}
	if dom.XTicks < seconds-1 || len(dom.XLabels) != 3 || !slices.Contains(dom.XLabels, "seconds since the first arrival") ||
		!slices.Contains(dom.YLabels, "requests per second") || !slices.Contains(dom.YLabels, "ms from the scheduled send") {
		t.Errorf("axes: %d x ticks, x labels %q, y labels %q", dom.XTicks, dom.XLabels, dom.YLabels)
	}
	f := res.Funnel
	if want := []int{f.Admission + f.Stock + f.Orders, f.Stock + f.Orders, f.Orders, f.Paid}; !slices.Equal(dom.Bars, want) || f.Paid == 0 {
		t.Errorf("funnel bars %v, want the run's %v", dom.Bars, want)
	}
	for i, w := range dom.BarWidths {
		if (w > 0) != (dom.Bars[i] > 0) || i > 0 && w > dom.BarWidths[i-1]+0.5 {
			t.Errorf("funnel bar widths %v for values %v: want them drawn in proportion", dom.BarWidths, dom.Bars)
			break
		}
	}
	if dom.Verdict != "true" || dom.OKs != 6 {
		t.Errorf("verdict data-ok=%q with %d invariants ok, want true and 6", dom.Verdict, dom.OKs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range requests {
		if u != page {
			t.Errorf("the report fetched %s: it must fetch nothing", u)
		}
	}
	if dom.Resources != 0 {
		t.Errorf("the page loaded %d resources, want none", dom.Resources)
	}
}
