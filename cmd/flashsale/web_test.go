package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests: headless Debian chromium (.ci/run installs it) driven by
// chromedp against the real program in demo mode. Without chromium they
// skip, except under CI, where they must run.

// The browser tests share one headless chromium, each in a browser context
// of its own (its own cookies, storage and cache, as a fresh profile gave
// it): starting a browser for each of the 36 tests took 1.7 s of the
// machine's time each. TestMain stops it (stopBrowser).
var browser struct {
	mu   sync.Mutex
	root context.Context // the browser's first tab: the browser lives as long as it
	stop func()
	logf func(string, ...any) // the running browser test's t.Logf
}

// browserLogf passes what chromedp reports on to the running test's log.
func browserLogf(format string, args ...any) {
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.logf != nil {
		browser.logf(format, args...)
	}
}

// mustBrowser returns a new tab, in a browser context of its own, of the
// shared headless chromium, starting it (again, if it has gone) first. On
// failure the tab's screenshot is saved and its path logged.
func mustBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and chromium is not installed (.ci/run installs it)")
		}
		t.Skip("chromium is not installed: apt-get install -y chromium")
	}
	browser.mu.Lock()
	if browser.root == nil || browser.root.Err() != nil {
		if browser.stop != nil {
			browser.stop()
		}
		browser.root, browser.stop, err = startBrowser(path)
	}
	root := browser.root
	browser.logf = t.Logf
	browser.mu.Unlock()
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tab, cancelTab := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	ctx, cancelTime := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			// From the tab, not ctx: a test that ran out of time still
			// leaves its picture.
			shot, cancel := context.WithTimeout(tab, 5*time.Second)
			if png, err := chromedp.Run(shot, chromedp.FullScreenshot(100)); err == nil {
				f := filepath.Join(os.TempDir(), fmt.Sprintf("flashsale-%s-%d.png", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().Unix()))
				if os.WriteFile(f, png, 0o644) == nil {
					t.Logf("screenshot: %s", f)
				}
			}
			cancel()
		}
		cancelTime()
		cancelTab() // closes the tab and disposes of its browser context
		browser.mu.Lock()
		browser.logf = nil
		browser.mu.Unlock()
	})
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		t.Fatalf("open a tab in chromium: %v", err)
	}
	return ctx
}

// startBrowser starts headless chromium with a profile of its own and
// returns its first tab and what stops it.
func startBrowser(path string) (context.Context, func(), error) {
	// The profile's directory is removed by stop, with retries: the
	// browser's helper processes may still write to it for a moment after
	// the allocator's cancel.
	profile, err := os.MkdirTemp("", "flashsale-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(360, 800), // a phone's width
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancelRoot := chromedp.NewContext(actx, chromedp.WithErrorf(browserLogf))
	stop := func() {
		cancelRoot()
		cancelAlloc()
		testenv.Poll(2*time.Second, 100*time.Millisecond, func() bool { return os.RemoveAll(profile) == nil })
	}
	if err := chromedp.Do(root); err != nil { // starts the browser
		stop()
		return nil, nil, err
	}
	return root, stop, nil
}

// stopBrowser stops the shared chromium, if a test started it.
func stopBrowser() {
	browser.mu.Lock()
	defer browser.mu.Unlock()
	if browser.stop != nil {
		browser.stop()
		browser.root, browser.stop = nil, nil
	}
}

// wrongClock sets the page's device clock an hour ahead: Date.now and new
// Date() lie, as a guest's phone may.
const wrongClock = `(() => {
  const RealDate = Date, off = 3600e3;
  class WrongDate extends RealDate {
    constructor(...a) { if (a.length) super(...a); else super(RealDate.now() + off); }
    static now() { return RealDate.now() + off; }
  }
  globalThis.Date = WrongDate;
})();`

// cdpDo sends one protocol command as a step.
func cdpDo[P any, R any](cmd cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, cmd, params)
		return chromedp.Void{}, err
	}
}

func jsBool(t *testing.T, ctx context.Context, expr string) bool {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return b
}

func textOf(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

func attrOf(t *testing.T, ctx context.Context, css, name string) string {
	t.Helper()
	a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(css), name))
	if err != nil {
		t.Fatalf("%s of %s: %v", name, css, err)
	}
	return a.Value
}

func runSteps(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func visible(css string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(css))
}

// TestBrowserSalePage: a guest opens the demo sale at phone width, sees
// the rooms left and the countdown, clicks buy once (the button disables
// at once), is queued then held with "pay within" counting down, and the
// rooms left drop over the event stream; the operator's view says one
// room held, not two.
func TestBrowserSalePage(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	var list struct {
		Sales []struct {
			ID string `json:"id"`
		} `json:"sales"`
	}
	if st, err := c.do(ctx, "GET", "/api/sales", "", nil, nil, &list); err != nil || st != 200 || len(list.Sales) != 1 {
		t.Fatalf("demo sale: %d %v %+v", st, err, list)
	}
	id := list.Sales[0].ID

	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))
	left, countdown, title := textOf(t, ctx, "#left"), textOf(t, ctx, "#countdown"), textOf(t, ctx, "#title")
	if left != "5" || !strings.Contains(countdown, "Ends in") || !strings.Contains(title, "Christmas") {
		t.Fatalf("page shows left=%q countdown=%q title=%q", left, countdown, title)
	}
	if jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy disabled while the sale is open")
	}

	// Two clicks in one task: the second must find the button disabled.
	if !jsBool(t, ctx, `(() => { const b = document.getElementById('buy'); b.click(); const d = b.disabled; b.click(); return d; })()`) {
		t.Fatal("buy still enabled right after one click")
	}
	runSteps(t, ctx, visible(`#state[data-state="held"]`))
	hold := textOf(t, ctx, "#hold")
	if !strings.Contains(hold, "Pay within 1:") && !strings.Contains(hold, "Pay within 2:") {
		t.Fatalf("hold line %q, want a live 'Pay within m:ss' of the 120 s hold", hold)
	}
	runSteps(t, ctx, visible(`#left[data-left="4"]`))
	if cd := textOf(t, ctx, "#countdown"); !strings.Contains(cd, "live") {
		t.Fatalf("countdown %q: the rooms did not come over the event stream", cd)
	}
	if !jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy enabled while the guest holds a room")
	}
	var held int
	for _, n := range c.adminSale(t, id).Nights {
		held += n.Held
	}
	if held != 1 {
		t.Fatalf("%d rooms held after a double click, want 1", held)
	}
	// The countdown is live: the hold line moves.
	runSteps(t, ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById('hold').textContent !== %q`, hold),
		chromedp.WithPollingTimeout(5*time.Second)))
	shoot(t, ctx, "sale-held")
}

// TestBrowserCountdown: with the device clock an hour ahead, a sale that
// starts in 4 s by the server's clock shows its countdown and keeps the
// button disabled until then, then enables it.
func TestBrowserCountdown(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{3}, 1, true)
	startsAt := time.Now().Add(4 * time.Second).Truncate(time.Second).Add(time.Second)
	sale["starts_at"] = startsAt.Format(time.RFC3339)
	id := c.createSale(t, sale)

	runSteps(t, ctx,
		cdpDo(page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: wrongClock}),
		chromedp.Navigate("http://"+m.Addr()+"/sales/"+id),
		visible(`#state[data-state="waiting"]`))
	startsIn := attrOf(t, ctx, "#countdown", "data-starts-in")
	if !jsBool(t, ctx, `Date.now() - performance.timeOrigin - performance.now() > 3000e3`) {
		t.Fatal("the page's clock is not wrong: the test proves nothing")
	}
	if startsIn == "0" || startsIn == "" {
		t.Fatalf("starts in %q s by the page, want the server's few seconds", startsIn)
	}
	for time.Until(startsAt) > 300*time.Millisecond {
		if !jsBool(t, ctx, `document.getElementById('buy').disabled`) {
			t.Fatalf("buy enabled %s before the start", time.Until(startsAt))
		}
		time.Sleep(200 * time.Millisecond)
	}
	runSteps(t, ctx, visible(`#state[data-state="ready"]`))
	if late := time.Since(startsAt); late > 1500*time.Millisecond {
		t.Errorf("enabled %s after the start", late)
	}
	if jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy disabled after the start")
	}
}

// TestBrowserChinese: Accept-Language zh-CN gets the Chinese page; the
// switch turns it to English.
func TestBrowserChinese(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{2}, 1, true))
	runSteps(t, ctx,
		cdpDo(network.Enable, network.EnableParams{}),
		cdpDo(network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}}),
		chromedp.Navigate("http://"+m.Addr()+"/sales/"+id),
		visible(`#state[data-state="ready"]`))
	lang, buy := attrOf(t, ctx, "html", "lang"), textOf(t, ctx, "#buy")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#lang")))
	after := textOf(t, ctx, "#buy")
	if lang != "zh-CN" || buy != "立即抢购" || after != "Buy" {
		t.Fatalf("lang %q, button %q, after the switch %q", lang, buy, after)
	}

	// The console too, with the same Accept-Language: its form, in Chinese
	// until the switch (kept in localStorage, so switch it back first).
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](`localStorage.removeItem('flashsale.lang')`),
		chromedp.Navigate("http://"+m.Addr()+"/admin"), visible(`#token`),
		chromedp.SetValue(chromedp.CSS("#token"), testAdminToken), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		visible(`#new`), chromedp.Click(chromedp.CSS("#new")), visible("#create"),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), visible("#create-errors"))
	if h, label, err := textOf(t, ctx, "h1"), textOf(t, ctx, `label[for="f-hotel"]`), textOf(t, ctx, "#e-title"); h != "运营控制台" || label != "酒店" || !strings.Contains(err, "必填") {
		t.Fatalf("console in Chinese: heading %q, hotel label %q, title error %q", h, label, err)
	}
	shoot(t, ctx, "console-zh")
}

// TestBrowserChallenge: a sale that asks for proof of work is bought
// through the Web Worker's solution.
func TestBrowserChallenge(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{2}, 1, true)
	sale["challenge"] = map[string]any{"difficulty": 12}
	id := c.createSale(t, sale)
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`),
		chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
}

// TestBrowserSoldOut: while a guest watches, another buys the last room;
// the page says sold out and disables the button without a reload.
func TestBrowserSoldOut(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{1}, 1, true))
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`))
	if st, o, err := c.purchase(ctx, id, "bob", true, nil, ""); err != nil || st != 202 {
		t.Fatalf("bob's purchase: %d %v %+v", st, err, o)
	}
	runSteps(t, ctx, visible(`#state[data-state="sold_out"]`), visible(`#left[data-left="0"]`))
	if !jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy enabled on a sold-out sale")
	}
}

// TestBrowserConsole: the operator signs in with the admin token and sees
// the sale's nights; the token stays in session storage, not the URL.
func TestBrowserConsole(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{4, 6}, 1, true))
	if st, _, err := c.purchase(ctx, id, "bob", true, nil, ""); err != nil || st != 202 {
		t.Fatalf("bob's purchase: %d %v", st, err)
	}
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/console"), visible(`#token`),
		chromedp.SendKeys(chromedp.CSS("#token"), "wrong"), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('msg').textContent.includes('refused')`, chromedp.WithPollingTimeout(5*time.Second)))
	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#token"), testAdminToken), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		visible(`#sales button[data-open]`), visible(`#signout`),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sales button[data-open=%q]`, id))),
		chromedp.Poll[chromedp.Void](`document.getElementById('d-title').textContent.startsWith('Storm') &&
			[...document.querySelectorAll('#d-nights tr.total td')].map(td => td.textContent).join() === '10,9,1,0'`,
			chromedp.WithPollingTimeout(10*time.Second)))
	if !jsBool(t, ctx, `getComputedStyle(document.getElementById('signin')).display === 'none'`) {
		t.Fatal("the sign-in form still shows once signed in")
	}
	if !jsBool(t, ctx, `sessionStorage.getItem('flashsale.admin') === `+fmt.Sprintf("%q", testAdminToken)+` && !location.href.includes(`+fmt.Sprintf("%q", testAdminToken)+`)`) {
		t.Fatal("admin token not kept in session storage only")
	}
}
