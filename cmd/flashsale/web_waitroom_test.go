package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/app"
)

// Browser tests of the waiting room (issue 24): the sale page's queue and
// the console's queue panel.

// waitRoomSale creates a sale of stock rooms on one night with a waiting
// room that opens 5 minutes before a start in `in`, letting in rate guests
// a second, each with admission seconds to start buying; it returns the
// sale and its start.
func waitRoomSale(t *testing.T, c *client, stock int, in time.Duration, rate float64, admission int) (string, time.Time) {
	t.Helper()
	start := time.Now().Add(in).Truncate(time.Second).Add(time.Second)
	sale := saleJSON([]int{stock}, 1, true)
	sale["starts_at"] = start.Format(time.RFC3339)
	sale["waiting_room"] = map[string]any{"prequeue_minutes": 5, "admit_per_second": rate, "admission_seconds": admission}
	return c.createSale(t, sale), start
}

// joinQueue joins user to the sale's waiting room over the API.
func joinQueue(t *testing.T, ctx context.Context, c *client, id, user string) flashsale.QueueView {
	t.Helper()
	var v flashsale.QueueView
	if st, err := c.do(ctx, "POST", "/api/sales/"+id+"/queue", c.jwt(user), nil, nil, &v); err != nil || st != http.StatusCreated {
		t.Fatalf("%s joins: %d %v", user, st, err)
	}
	return v
}

// waitDrawn waits until the sale's draw is published (the first admission
// step after the start), so a guest who joins now goes to the back.
func waitDrawn(t *testing.T, ctx context.Context, c *client, id string) flashsale.Draw {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var d flashsale.Draw
		if st, err := c.do(ctx, "GET", "/api/sales/"+id+"/queue/draw", "", nil, nil, &d); err != nil || st != 200 {
			t.Fatalf("draw: %d %v", st, err)
		}
		if d.Seed != "" {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatal("the draw was not published 5 s after the start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordQueue makes the page note every place figure it shows (position,
// ETA), however briefly, in window.seen, and marks the page so a reload
// would show (window.loadMark goes with it).
const recordQueue = `(() => {
  window.loadMark = 'first load';
  window.seen = [];
  const note = () => {
    const p = document.getElementById('q-position'), e = document.getElementById('q-eta');
    if (document.getElementById('q-figures').hidden || !p.dataset.n) return;
    const last = window.seen[window.seen.length - 1];
    const cur = { position: +p.dataset.n, eta: e.textContent };
    if (!last || last.position !== cur.position || last.eta !== cur.eta) window.seen.push(cur);
  };
  new MutationObserver(note).observe(document.getElementById('queue'), { subtree: true, childList: true, characterData: true, attributes: true });
})()`

// TestBrowserWaitingRoom is issue 24's done-when: a guest waits in the
// queue, sees their position fall and the ETA, is admitted ("Your turn:
// buy within 0:4x", counting) and buys; another guest, behind them, is
// told sold_out over the place stream the moment the last room is spoken
// for, without a reload. Five guests joined over the API before the
// start, so the page's guests, joining after the draw, go to the back and
// have someone ahead of them; at one admission a second their place falls.
func TestBrowserWaitingRoom(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	const ahead = 5
	id, start := waitRoomSale(t, c, ahead+1, 3*time.Second, 1, 45)
	for i := range ahead {
		joinQueue(t, ctx, c, id, fmt.Sprintf("early%d", i))
	}
	page := "http://" + m.Addr() + "/sales/" + id

	// Before the start the page offers the queue, and the buy button is off.
	runSteps(t, ctx, chromedp.Navigate(page), visible(`#queue[data-state="join"]`), visible(`#q-join`),
		visible(`#state[data-state="queue_join"]`))
	if !jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy enabled on a waiting-room sale before the guest joined")
	}
	if got := textOf(t, ctx, "#q-join"); got != "Join the waiting room" {
		t.Fatalf("join button %q", got)
	}
	if time.Now().After(start) {
		t.Fatalf("the page loaded %v after the start: the test's timing is off", time.Since(start))
	}
	d := waitDrawn(t, ctx, c, id)
	if len(d.Order) != ahead {
		t.Fatalf("%d tickets drawn, want the %d early guests", len(d.Order), ahead)
	}

	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](recordQueue), chromedp.Click(chromedp.CSS("#q-join")),
		visible(`#queue[data-state="waiting"]`), visible(`#state[data-state="queue_waiting"]`))
	first, err := strconv.Atoi(attrOf(t, ctx, "#q-position", "data-n"))
	if err != nil || first < 2 {
		t.Fatalf("position %d (%v) on joining behind %d guests let in at 1/s, want 2 or more", first, err, ahead)
	}
	if eta := textOf(t, ctx, "#q-eta"); !regexp.MustCompile(`^0:0\d$`).MatchString(eta) {
		t.Errorf("ETA %q, want m:ss of a few seconds", eta)
	}
	if got := textOf(t, ctx, "#q-ahead"); got != strconv.Itoa(first-1) {
		t.Errorf("%s ahead at position %d", got, first)
	}
	shoot(t, ctx, "sale-queue-waiting")

	// A second guest, in another tab, joins behind.
	other, cancel := chromedp.NewContext(ctx)
	defer cancel()
	runSteps(t, other, chromedp.Navigate(page), visible(`#queue[data-state="join"]`), chromedp.Evaluate[chromedp.Void](recordQueue),
		chromedp.Click(chromedp.CSS("#q-join")), visible(`#queue[data-state="waiting"]`))
	if p, _ := strconv.Atoi(attrOf(t, other, "#q-position", "data-n")); p <= 1 {
		t.Fatalf("the second guest is at position %d, want behind the first", p)
	}
	pollJS(t, other, `document.getElementById('queue').dataset.feed === 'stream'`, 5*time.Second)

	// The first guest's turn comes.
	runSteps(t, ctx, visible(`#queue[data-state="admitted"]`), visible(`#state[data-state="ready"]`))
	admitted := time.Now()
	turn := textOf(t, ctx, "#q-turn")
	if !regexp.MustCompile(`^Your turn: buy within 0:4\d$`).MatchString(turn) {
		t.Fatalf("turn line %q, want the 45 s admission counting", turn)
	}
	seen := jsString(t, ctx, `JSON.stringify(window.seen)`)
	if !jsBool(t, ctx, `window.seen.length >= 2 && window.seen.every((s, i) => i === 0 || s.position <= window.seen[i-1].position) && window.seen[0].position > window.seen[window.seen.length-1].position`) {
		t.Fatalf("positions shown %s: want them falling, never rising", seen)
	}
	t.Logf("the first guest saw %s", seen)
	if jsBool(t, ctx, `document.getElementById('buy').disabled`) {
		t.Fatal("buy disabled on the guest's turn")
	}

	// The last room is promised to the first guest: the second hears
	// sold_out pushed, on the page it loaded.
	runSteps(t, other, visible(`#queue[data-state="sold_out"]`), visible(`#state[data-state="sold_out"]`))
	t.Logf("the second guest read sold_out %v after the first was admitted", time.Since(admitted))
	if !jsBool(t, other, `window.loadMark === 'first load' && document.getElementById('queue').dataset.feed === 'stream'`) {
		t.Fatal("sold_out came by a reload or a poll, not the stream")
	}
	if !jsBool(t, other, `document.getElementById('buy').disabled && document.getElementById('q-join').hidden`) {
		t.Fatal("the sold-out guest is offered buy or join")
	}
	if note := textOf(t, other, "#q-note"); !strings.Contains(note, "You keep your place") {
		t.Errorf("sold-out note %q", note)
	}

	// The turn counts down, and the guest buys.
	runSteps(t, ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.getElementById('q-turn').textContent !== %q`, turn),
		chromedp.WithPollingTimeout(3*time.Second)))
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
	if !jsBool(t, ctx, `document.getElementById('q-turn').hidden`) {
		t.Error("the turn still counts once the guest holds a room")
	}
	if n := c.adminSale(t, id).Nights[0]; n.Held != 1 {
		t.Fatalf("night %+v, want the guest's room held", n)
	}
	shoot(t, ctx, "sale-waiting-room")
}

// TestBrowserQueueConsole: the operator watches a waiting room from the
// console. Before the start the queue panel shows the guests who joined,
// the draw's commitment (the one the public draw publishes) and no seed;
// from the start the seed, as published. A pace the sale refuses is
// caught in the form and nothing is sent; a faster one applies live: the
// slow queue empties at once. Pausing admissions (the panel's button)
// pauses the waiting room and resuming undoes it; pausing the sale (the
// dashboard's own action) says the queue is paused.
func TestBrowserQueueConsole(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	const guests = 6
	id, start := waitRoomSale(t, c, 20, 6*time.Second, 0.2, 30)
	for i := range guests {
		joinQueue(t, ctx, c, id, fmt.Sprintf("guest%d", i))
	}
	var before flashsale.Draw
	if st, err := c.do(ctx, "GET", "/api/sales/"+id+"/queue/draw", "", nil, nil, &before); err != nil || st != 200 || before.Commitment == "" {
		t.Fatalf("draw before the start: %d %v %+v", st, err, before)
	}

	consoleSignIn(t, ctx, "http://"+m.Addr(), "#sale="+id)
	n := func(k string) string { return fmt.Sprintf(`document.getElementById('wq-%s').dataset.n`, k) }
	pollJS(t, ctx, n("joined")+` === '6' && `+n("waiting")+` === '6' && `+n("admitted")+` === '0'`, 5*time.Second)
	if got := textOf(t, ctx, "#wq-commitment"); got != before.Commitment {
		t.Fatalf("commitment %q on the console, %q published", got, before.Commitment)
	}
	if seed, state := textOf(t, ctx, "#wq-seed"), attrOf(t, ctx, "#d-queue", "data-state"); time.Now().Before(start) &&
		(seed != "revealed at the start" || state != "before") {
		t.Fatalf("before the start: seed %q, state %q", seed, state)
	}
	if got := jsString(t, ctx, `document.getElementById('wq-rate').value + ' ' + document.getElementById('wq-admission').value`); got != "0.2 30" {
		t.Errorf("pace form %q, want the sale's 0.2 30", got)
	}
	shoot(t, ctx, "console-queue")

	// From the start: the seed, as the public draw reveals it, and one
	// guest let in every 5 s.
	pollJS(t, ctx, `document.getElementById('d-queue').dataset.state === 'moving'`, time.Until(start)+5*time.Second)
	d := waitDrawn(t, ctx, c, id)
	pollJS(t, ctx, fmt.Sprintf(`document.getElementById('wq-seed').textContent === %q`, d.Seed), 3*time.Second)
	if w, _ := strconv.Atoi(jsString(t, ctx, n("waiting"))); w < guests-2 {
		t.Fatalf("%d waiting right after the start at 0.2 a second, want %d or more", w, guests-2)
	}

	// A rate below 0.1 is refused in the form: nothing is sent.
	rev := c.saleDetail(t, id).Revision
	runSteps(t, ctx, setInput("wq-rate", "0.01"), chromedp.Click(chromedp.CSS("#wq-save")))
	pollJS(t, ctx, `document.getElementById('wq-msg').textContent.includes('0.1 to 100000')`, 3*time.Second)
	if got := attrOf(t, ctx, "#wq-rate", "aria-invalid"); got != "true" {
		t.Errorf("bad rate aria-invalid %q", got)
	}
	if r := c.saleDetail(t, id).Revision; r != rev {
		t.Fatalf("revision %d after a refused pace, was %d", r, rev)
	}

	// Pausing admissions holds the queue while the sale goes on: the
	// panel says so and the sale's waiting room is paused; resuming
	// undoes it.
	adminRoom := func() *flashsale.WaitingRoom {
		var v struct {
			WaitingRoom *flashsale.WaitingRoom `json:"waiting_room"`
		}
		if st, err := c.do(ctx, "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &v); err != nil || st != 200 || v.WaitingRoom == nil {
			t.Fatalf("the sale's waiting room: %d %v", st, err)
		}
		return v.WaitingRoom
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#wq-pause")))
	pollJS(t, ctx, `document.getElementById('d-queue').dataset.state === 'admissions_paused'`, 5*time.Second)
	if w := adminRoom(); !w.Paused {
		t.Fatalf("after Pause admissions the sale's waiting room is %+v, want paused", w)
	}
	if got := textOf(t, ctx, "#wq-pause"); got != "Resume admissions" {
		t.Errorf("the button reads %q while paused", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#wq-pause")))
	pollJS(t, ctx, `document.getElementById('d-queue').dataset.state === 'moving'`, 5*time.Second)
	if w := adminRoom(); w.Paused {
		t.Fatalf("after Resume admissions the sale's waiting room is %+v, want not paused", w)
	}

	// A faster pace applies live: everyone waiting is let in.
	runSteps(t, ctx, setInput("wq-rate", "50"), setInput("wq-admission", "40"), chromedp.Click(chromedp.CSS("#wq-save")))
	pollJS(t, ctx, `document.getElementById('wq-msg').textContent.includes('Pace applied')`, 5*time.Second)
	var got struct {
		WaitingRoom *flashsale.WaitingRoom `json:"waiting_room"`
	}
	if st, err := c.do(ctx, "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &got); err != nil || st != 200 || got.WaitingRoom == nil ||
		*got.WaitingRoom != (flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 50, AdmissionSeconds: 40}) {
		t.Fatalf("the sale's waiting room after the change: %d %v %+v", st, err, got.WaitingRoom)
	}
	pollJS(t, ctx, `document.getElementById('wq-rate-now').dataset.n === '50'`, 3*time.Second)
	pollJS(t, ctx, n("waiting")+` === '0' && `+n("admitted")+` === '6'`, 3*time.Second)

	// Pausing the sale stops admissions, and the panel says so.
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-pause")))
	confirmDialog(t, ctx, true)
	pollJS(t, ctx, `document.getElementById('d-queue').dataset.state === 'paused'`, 5*time.Second)
	if got := textOf(t, ctx, "#wq-state"); !strings.Contains(got, "paused") {
		t.Errorf("queue state %q on a paused sale", got)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the queue panel scrolls sideways at 360 px")
	}
}

// noPlaceStream makes the page's place stream fail, as a proxy that
// buffers or drops it would: the page must follow the place by polling.
const noPlaceStream = `(() => {
  const real = window.fetch;
  window.fetch = (url, opts) => String(url).endsWith('/queue/events') ? Promise.reject(new TypeError('blocked by the test')) : real(url, opts);
})();`

// TestBrowserWaitingRoomExpired: with its place stream failing, the page
// follows the guest's place by polling; the guest is admitted, lets the
// turn lapse, reads that it passed with a "Join again" button, joins
// again (at the back, here the front, since nobody else waits) and buys.
func TestBrowserWaitingRoomExpired(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id, _ := waitRoomSale(t, c, 3, 0, 10, 10)
	runSteps(t, ctx,
		cdpDo(page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: noPlaceStream}),
		chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#q-join`), chromedp.Click(chromedp.CSS("#q-join")),
		visible(`#queue[data-state="admitted"]`), visible(`#state[data-state="ready"]`))
	if feed := attrOf(t, ctx, "#queue", "data-feed"); feed != "poll" {
		t.Fatalf("the place comes by %q with its stream failing, want poll", feed)
	}
	if turn := textOf(t, ctx, "#q-turn"); !regexp.MustCompile(`^Your turn: buy within 0:(10|0\d)$`).MatchString(turn) {
		t.Fatalf("turn line %q, want the 10 s admission", turn)
	}

	// The turn lapses unused: the server says expired, and the page offers
	// to join again.
	runSteps(t, ctx, chromedp.Poll[chromedp.Void](`document.getElementById('queue').dataset.place === 'expired'`, chromedp.WithPollingTimeout(15*time.Second)),
		visible(`#queue[data-state="expired"]`), visible(`#state[data-state="queue_expired"]`), visible(`#q-join`))
	if got := textOf(t, ctx, "#q-join"); got != "Join again" {
		t.Fatalf("join button %q after the turn passed", got)
	}
	if !jsBool(t, ctx, `document.getElementById('buy').disabled && document.getElementById('q-turn').hidden`) {
		t.Fatal("buying still offered after the turn passed")
	}
	if note := textOf(t, ctx, "#q-note"); !strings.Contains(note, "join again, at the back") {
		t.Errorf("expired note %q", note)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#q-join")), visible(`#queue[data-state="admitted"]`),
		chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
}
