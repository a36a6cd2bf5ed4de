package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests of the operator console's create form and live dashboard.

// shoot saves the page as $FLASHSALE_TEST_SCREENSHOTS/name.png when that is
// set (how README's screenshots are taken); otherwise it does nothing.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("FLASHSALE_TEST_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}

// consoleSignIn opens the console at path (with its #fragment) and signs in.
func consoleSignIn(t *testing.T, ctx context.Context, base, fragment string) {
	t.Helper()
	runSteps(t, ctx, chromedp.Navigate(base+"/console"+fragment), visible(`#token`),
		chromedp.SetValue(chromedp.CSS("#token"), testAdminToken), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		visible(`#dash`))
}

// setInput sets an input's value as typing would end (an input event
// follows); a datetime-local reads its value back without :00 seconds,
// which chromedp.SetValue takes for a failure.
func setInput(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); })()`, id, v))
}

// pollJS waits until expr is true. An expression that throws (an element
// not drawn yet) counts as not yet: the console draws a sale's dashboard
// only once its list is in.
func pollJS(t *testing.T, ctx context.Context, expr string, timeout time.Duration) {
	t.Helper()
	safe := "(() => { try { return !!(" + expr + "); } catch (e) { return false; } })()"
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](safe, chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

func jsString(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// TestBrowserConsoleCreate: the operator creates a sale through the form.
// The client-side checks name each bad field (aria-invalid, its own
// message, a summary, focus on the first) and send nothing; a field the
// server refuses (a tier this page's list should not have offered) is
// shown at that field from the 400; the fixed form creates the sale as
// typed and opens its dashboard.
func TestBrowserConsoleCreate(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	before := len(c.adminSales(t))
	consoleSignIn(t, ctx, base, "")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#new")), visible("#create"))
	if id := jsString(t, ctx, `document.activeElement.id`); id != "f-title" {
		t.Fatalf("focus on %q after opening the form, want the title", id)
	}
	// A new sale's time zone is the browser's own until the operator picks the hotel's.
	if got, want := jsString(t, ctx, `document.getElementById('f-time_zone').value`), jsString(t, ctx, `Intl.DateTimeFormat().resolvedOptions().timeZone`); got == "" || got != want {
		t.Errorf("time zone prefilled %q, want the browser's %q", got, want)
	}
	set := func(id, v string) chromedp.Action[chromedp.Void] { return setInput(id, v) }
	runSteps(t, ctx,
		set("f-hotel", "Harbour View"), set("f-room_type", "Deluxe King"), set("f-time_zone", "Mars/Olympus_Mons"),
		set("f-price", "39900"), set("f-original_price", "69900"),
		set("f-per_user_limit", "0"), set("f-per_user", "5/x"), set("f-channels", "ota-a, BAD!"), set("f-admission_seconds", "5"),
		set("f-starts_at", testenv.NightTime(-4).Add(20*time.Hour).Format("2006-01-02T15:04:05")),
		set("f-ends_at", testenv.NightTime(-4).Add(19*time.Hour).Format("2006-01-02T15:04:05")),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), visible("#create-errors"))
	for _, tt := range []struct{ input, line, want string }{
		{"f-title", "e-title", "Required"},
		{"f-per_user_limit", "e-per_user_limit", "from 1 to 1000"},
		{"f-per_user", "e-per_user", "5/s"},
		{"f-channels", "e-channels", "a-z"},
		{"f-ends_at", "e-ends_at", "after the start"},
		{"f-time_zone", "e-time_zone", "Not a time zone"},
		{"f-admission_seconds", "e-admission_seconds", "from 10 to 3600"},
	} {
		if got := attrOf(t, ctx, "#"+tt.input, "aria-invalid"); got != "true" {
			t.Errorf("%s aria-invalid %q", tt.input, got)
		}
		if got := textOf(t, ctx, "#"+tt.line); !strings.Contains(got, tt.want) {
			t.Errorf("%s says %q, want %q", tt.line, got, tt.want)
		}
	}
	if got := attrOf(t, ctx, "#f-hotel", "aria-invalid"); got != "" {
		t.Errorf("a good field is marked invalid: %q", got)
	}
	if id := jsString(t, ctx, `document.activeElement.id`); id != "f-title" {
		t.Errorf("focus on %q after the checks, want the first bad field", id)
	}
	if got := textOf(t, ctx, "#create-errors"); !strings.Contains(got, "7 problem") {
		t.Errorf("summary %q", got)
	}
	if !jsBool(t, ctx, `document.getElementById('waiting-room').open`) {
		t.Error("the waiting room's group stayed closed over its bad field")
	}
	if n := len(c.adminSales(t)); n != before {
		t.Fatalf("%d sales after a refused form, want %d: the checks sent it", n, before)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the form scrolls sideways at 360 px")
	}
	shoot(t, ctx, "console-form-errors")

	// Fixed, with a second night and a tier the server does not know.
	start := time.Now().Add(time.Hour).Truncate(time.Minute)
	runSteps(t, ctx,
		set("f-title", "Console sale"), set("f-time_zone", "Asia/Shanghai"), set("f-per_user_limit", "2"), set("f-per_user", "5/s,10"), set("f-channels", "ota-a"),
		set("f-prequeue_minutes", "30"), set("f-admit_per_second", "2.5"), set("f-admission_seconds", "60"),
		set("f-starts_at", start.Format("2006-01-02T15:04:05")), set("f-ends_at", start.Add(2*time.Hour).Format("2006-01-02T15:04:05")),
		chromedp.Click(chromedp.CSS("#add-night")),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('f-min_tier'); s.add(new Option('diamond', 'diamond')); s.value = 'diamond'; })()`),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)))
	pollJS(t, ctx, `document.getElementById('e-min_tier').textContent.includes('min_tier')`, 5*time.Second)
	if got := attrOf(t, ctx, "#f-min_tier", "aria-invalid"); got != "true" {
		t.Errorf("the server's field not marked: aria-invalid %q", got)
	}
	if n := len(c.adminSales(t)); n != before {
		t.Fatalf("%d sales after the server's 400, want %d", n, before)
	}

	runSteps(t, ctx, set("f-min_tier", "silver"), chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		visible(`#detail`))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Console sale')`, 5*time.Second)
	if !jsBool(t, ctx, `document.getElementById('create').hidden`) {
		t.Error("the form still shows after the sale was created")
	}
	var got struct {
		Title        string
		TimeZone     string    `json:"time_zone"`
		PerUserLimit int       `json:"per_user_limit"`
		HoldSeconds  int       `json:"hold_seconds"`
		StartsAt     time.Time `json:"starts_at"`
		Eligibility  struct {
			MinTier  string `json:"min_tier"`
			Channels []string
		}
		Limits struct {
			PerUser string `json:"per_user"`
		}
		WaitingRoom *flashsale.WaitingRoom `json:"waiting_room"`
		Nights      []struct {
			Date  string
			Stock int
		}
	}
	id := strings.TrimPrefix(jsString(t, ctx, `location.hash`), "#sale=")
	if st, err := c.do(ctx, "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &got); err != nil || st != 200 {
		t.Fatalf("the created sale %q: %d %v", id, st, err)
	}
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format("2006-01-02") // the form's first night
	if got.Title != "Console sale" || got.TimeZone != "Asia/Shanghai" || got.PerUserLimit != 2 || got.HoldSeconds != flashsale.HoldSecondsDefault || got.Eligibility.MinTier != "silver" ||
		strings.Join(got.Eligibility.Channels, ",") != "ota-a" || got.Limits.PerUser != "5/s,10" || !got.StartsAt.Equal(start) ||
		len(got.Nights) != 2 || got.Nights[0].Date != tomorrow || got.Nights[0].Stock != 5 || got.Nights[1].Stock != 5 ||
		got.WaitingRoom == nil || *got.WaitingRoom != (flashsale.WaitingRoom{PrequeueMinutes: 30, AdmitPerSecond: 2.5, AdmissionSeconds: 60}) {
		t.Fatalf("created %+v (waiting room %+v)", got, got.WaitingRoom)
	}
	// The dashboard says what the waiting room is.
	pollJS(t, ctx, `document.getElementById('d-waiting_room').textContent.includes('30 min')`, 5*time.Second)
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector('#sales tr[data-sale=%q]')`, id), 10*time.Second)
}

// adminSales lists every sale the operator can see (the public list while
// the admin list is not on this build).
func (c *client) adminSales(t *testing.T) []struct{ ID string } {
	t.Helper()
	var out struct{ Sales []struct{ ID string } }
	st, err := c.do(context.Background(), "GET", "/api/admin/sales", c.admin, nil, nil, &out)
	if st == http.StatusMethodNotAllowed || st == http.StatusNotFound {
		st, err = c.do(context.Background(), "GET", "/api/sales", "", nil, nil, &out)
	}
	if err != nil || st != 200 {
		t.Fatalf("list sales: %d %v", st, err)
	}
	return out.Sales
}

// TestBrowserConsoleStorm: the operator opens a sale's dashboard from the
// list with the keyboard and watches a small storm move it: the nights'
// held rooms, the funnel, purchases per second, 429s per second, the
// purchase route's p99, with the audit balanced and the breaker shown.
// Every figure comes over the dashboard's stream: a first purchase shows
// within 2 s, and the page polls nothing of the sale's (its admin view,
// audit, /metrics) nor the breaker while the stream is up.
func TestBrowserConsoleStorm(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{30, 30}, 1, true)
	sale["limits"] = map[string]any{"per_user": "1/m,1"} // a guest's second try is a 429
	id := c.createSale(t, sale)
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	open := fmt.Sprintf(`#sales button[data-open=%q]`, id)
	runSteps(t, ctx, visible(open), chromedp.Focus(chromedp.CSS(open)), chromedp.KeyEvent("\r"), visible("#d-title"))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Storm')`, 5*time.Second)
	if id := jsString(t, ctx, `document.activeElement.id`); id != "d-title" {
		t.Errorf("focus on %q after opening the dashboard, want its heading", id)
	}
	pollJS(t, ctx, `document.getElementById('detail').dataset.feed === 'stream'`, 5*time.Second)
	// Polls are fetches that end, so they are in the resource timing
	// buffer; the stream, still open, is not.
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](`performance.setResourceTimingBufferSize(100000); window.streamFrom = performance.now()`))
	if st, _, err := c.purchase(ctx, id, "first-guest", true, nil, ""); err != nil || st != 202 {
		t.Fatalf("first purchase: %d %v", st, err)
	}
	bought := time.Now()
	pollJS(t, ctx, `[...document.querySelectorAll('#d-nights tr.total td')].map(td => td.textContent).join() === '60,59,1,0'`, 2500*time.Millisecond)
	t.Logf("the first purchase on the dashboard after %s", time.Since(bought))

	// The storm: 24 guests over about 3 s, each buying twice.
	var accepted, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 125 * time.Millisecond) // spread over the console's samples
			user := "storm-" + strconv.Itoa(i)
			for range 2 {
				st, _, err := c.purchase(ctx, id, user, true, nil, "")
				switch {
				case err != nil:
					t.Errorf("%s: %v", user, err)
				case st == 202:
					accepted.Add(1)
				case st == 429:
					limited.Add(1)
				}
			}
		}()
	}
	// While it runs, the counters move on the page.
	pollJS(t, ctx, `+(document.querySelector('#c-purchases path.ok') || {}).dataset?.peak > 0`, 15*time.Second)
	wg.Wait()
	if accepted.Load() == 0 || limited.Load() == 0 {
		t.Fatalf("storm: %d accepted, %d limited: want both", accepted.Load(), limited.Load())
	}
	held := accepted.Load() + 1 // and the first guest's
	pollJS(t, ctx, fmt.Sprintf(`[...document.querySelectorAll('#d-nights tr.total td')].map(td => td.textContent).join() === '60,%d,%d,0'`, 60-held, held), 10*time.Second)
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('#c-stock rect.held').dataset.value === '%d'`, held), 5*time.Second)
	pollJS(t, ctx, fmt.Sprintf(`(document.getElementById('c-funnel').dataset.steps || '').split(',')[0] >= %d`, held+limited.Load()), 10*time.Second)
	pollJS(t, ctx, `+(document.querySelector('#c-refusals path.limited') || {}).dataset?.peak > 0`, 10*time.Second)
	pollJS(t, ctx, `+(document.querySelector('#c-p99 path.p99') || {}).dataset?.peak > 0`, 10*time.Second)
	pollJS(t, ctx, `document.getElementById('d-audit').textContent.includes('balanced')`, 15*time.Second)
	if got := textOf(t, ctx, "#d-breaker"); !strings.Contains(got, "no breaker") {
		t.Errorf("breaker %q, want the embedded shape's 'no breaker'", got)
	}
	if steps := strings.Split(attrOf(t, ctx, "#c-funnel", "data-steps"), ","); len(steps) != 5 || steps[3] != strconv.FormatInt(held, 10) {
		t.Errorf("funnel %v, want %d written", steps, held)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the dashboard scrolls sideways at 360 px")
	}
	if feed := attrOf(t, ctx, "#detail", "data-feed"); feed != "stream" {
		t.Errorf("the dashboard's feed is %q at the end, want the stream", feed)
	}
	polled := jsString(t, ctx, fmt.Sprintf(`performance.getEntriesByType('resource').filter(e => e.startTime >= window.streamFrom).map(e => new URL(e.name).pathname)
		.filter(p => p === '/metrics' || p === '/api/admin/breaker' || p.startsWith(%q)).join(' ')`, "/api/admin/sales/"+id))
	if polled != "" {
		t.Errorf("the page polled while the stream was up: %s", polled)
	}
	shoot(t, ctx, "console-storm")
}

// TestBrowserConsoleNoBreaker (issue 23, item 9): on the embedded shape,
// which has no breaker, the console asks for one once, not every second
// (each a 404 and a log line).
func TestBrowserConsoleNoBreaker(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	c.createSale(t, saleJSON([]int{2}, 1, true))
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/console"), visible(`#token`),
		chromedp.SetValue(chromedp.CSS("#token"), testAdminToken), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		visible(`#sales button[data-open]`))
	time.Sleep(4 * time.Second) // four refreshes of the list
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter(e => e.name.endsWith("/api/admin/breaker")).length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Logf("breaker requests in 4 s: %d", n)
		t.Error("the console kept asking the embedded shape for a breaker")
	}
}
