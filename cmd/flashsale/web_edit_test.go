package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests of the console's edit form, change log, orders (and their
// CSV) and test sales.

// saleDetail is what the edit tests read back of a sale by the admin API.
type saleDetail struct {
	Title, Description string
	Price              int64
	Revision           int64
	EndsAt             time.Time                       `json:"ends_at"`
	WaitingRoom        *struct{ AdmissionSeconds int } `json:"waiting_room"`
	Nights             []struct {
		Date  string
		Stock int
	}
}

func (c *client) saleDetail(t *testing.T, id string) saleDetail {
	t.Helper()
	var out saleDetail
	if st, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &out); err != nil || st != 200 {
		t.Fatalf("admin sale %s: %d %v", id, st, err)
	}
	return out
}

// openSale opens a sale's dashboard from the list and waits for its view.
func openSale(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	open := fmt.Sprintf(`#sales button[data-open=%q]`, id)
	runSteps(t, ctx, visible(open), chromedp.Click(chromedp.CSS(open)), visible("#d-revision"))
	pollJS(t, ctx, fmt.Sprintf(`location.hash === %q && !!document.getElementById('d-revision')`, "#sale="+id), 5*time.Second)
}

// TestBrowserConsoleEdit: before the start the operator edits any field
// (the client's checks first: an empty title and an end before the start
// are named and nothing is sent), and the dashboard shows the new
// revision; a sale that starts while its form is open refuses a price
// change with 409 already_started, which the form puts at the price and
// answers by locking the fields a started sale keeps (read-only, with the
// sentence saying why), keeping the title typed meanwhile, which then saves.
func TestBrowserConsoleEdit(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	later := saleJSON([]int{5, 5}, 2, true)
	later["title"] = "Later"
	later["starts_at"] = time.Now().Add(time.Hour).Format(time.RFC3339)
	later["ends_at"] = time.Now().Add(2 * time.Hour).Format(time.RFC3339)
	later["waiting_room"] = map[string]int{"prequeue_minutes": 15, "admission_seconds": 90}
	id := c.createSale(t, later)
	rev := c.saleDetail(t, id).Revision
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	openSale(t, ctx, id)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-edit")), visible("#create"))
	if got := jsString(t, ctx, `document.getElementById('f-title').value + '|' + document.getElementById('f-price').value + '|' + document.activeElement.id`); got != "Later|39900|f-title" {
		t.Fatalf("the edit form holds %q, want the sale prefilled and the focus on its title", got)
	}
	if !jsBool(t, ctx, `document.getElementById('edit-locked').hidden && !document.getElementById('f-price').readOnly && !document.getElementById('f-min_tier').disabled`) {
		t.Fatal("fields locked before the start")
	}
	if got := jsString(t, ctx, `['prequeue_minutes', 'admit_per_second', 'admission_seconds'].map((k) => document.getElementById('f-' + k).value).join('|') + '|' + document.getElementById('waiting-room').open`); got != "15|0|90|true" {
		t.Errorf("the waiting room's group holds %q, want the sale's, open", got)
	}
	// The client's checks.
	runSteps(t, ctx, setInput("f-title", ""), setInput("f-ends_at", "2020-01-01T00:00:00"), chromedp.Click(chromedp.CSS("#create-submit")), visible("#create-errors"))
	for _, f := range []string{"title", "ends_at"} {
		if got := attrOf(t, ctx, "#f-"+f, "aria-invalid"); got != "true" {
			t.Errorf("%s not marked invalid: %q", f, got)
		}
	}
	if got := textOf(t, ctx, "#create-errors"); !strings.Contains(got, "not changed: 2 problem") {
		t.Errorf("summary %q", got)
	}
	if got := c.saleDetail(t, id); got.Revision != rev || got.Title != "Later" {
		t.Fatalf("a refused form changed the sale: %+v", got)
	}
	// Any field before the start: title, description, price, a night's
	// rooms, and the waiting room turned off (its fields emptied: null).
	runSteps(t, ctx, setInput("f-title", "Later, edited"), setInput("f-description", "Sea view"),
		setInput("f-prequeue_minutes", ""), setInput("f-admit_per_second", ""), setInput("f-admission_seconds", ""),
		setInput("f-ends_at", time.Now().Add(3*time.Hour).Format("2006-01-02T15:04:05")), setInput("f-price", "35900"),
		chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector('#nights-rows [data-part="stock"]'); e.value = '7'; })()`),
		chromedp.Click(chromedp.CSS("#create-submit")))
	pollJS(t, ctx, `document.getElementById('create').hidden`, 5*time.Second)
	got := c.saleDetail(t, id)
	if got.Title != "Later, edited" || got.Description != "Sea view" || got.Price != 35900 || got.Nights[0].Stock != 7 || got.Nights[1].Stock != 5 || got.Revision <= rev ||
		got.WaitingRoom != nil {
		t.Fatalf("after the edit: %+v (revision before %d)", got, rev)
	}
	pollJS(t, ctx, fmt.Sprintf(`document.getElementById('d-revision').dataset.revision === '%d'`, got.Revision), 5*time.Second)
	if msg := textOf(t, ctx, "#d-msg"); !strings.Contains(msg, fmt.Sprintf("revision %d", got.Revision)) {
		t.Errorf("the dashboard says %q after saving, want the new revision", msg)
	}
	if id := jsString(t, ctx, `document.activeElement.id`); id != "d-edit" {
		t.Errorf("focus on %q after saving, want back on the edit button", id)
	}
	pollJS(t, ctx, `document.querySelector('#d-changes tbody tr').dataset.kind === 'edit'`, 5*time.Second)

	// A sale that starts while its form is open.
	soon := saleJSON([]int{5}, 1, true)
	soon["title"] = "Soon"
	start := time.Now().Add(8 * time.Second)
	soon["starts_at"] = start.Format(time.RFC3339Nano)
	sid := c.createSale(t, soon)
	// A reload with the sale in the fragment opens it (the list shows it within 5 s).
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`history.replaceState(null, '', %q)`, "#sale="+sid)), chromedp.Reload(), visible("#d-title"))
	pollJS(t, ctx, `document.getElementById('d-title') && document.getElementById('d-title').textContent.startsWith('Soon')`, 5*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-edit")), visible("#create"))
	if jsBool(t, ctx, `document.getElementById('f-price').readOnly`) {
		t.Fatalf("the price is read-only %s before the start", time.Until(start))
	}
	runSteps(t, ctx, setInput("f-price", "29900"), setInput("f-title", "Soon, renamed"))
	// The start is the server's: the dashboard says so when it comes.
	pollJS(t, ctx, `document.getElementById('d-title').dataset.status === 'active'`, 15*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#create-submit")))
	pollJS(t, ctx, `document.getElementById('e-price').textContent.includes('price')`, 5*time.Second)
	if got := attrOf(t, ctx, "#f-price", "aria-invalid"); got != "true" {
		t.Errorf("the price not marked after the 409: %q", got)
	}
	if !jsBool(t, ctx, `!document.getElementById('edit-locked').hidden && document.getElementById('f-price').readOnly && document.getElementById('f-hotel').readOnly &&
		document.getElementById('f-min_tier').disabled && document.getElementById('f-purchase_token').disabled && document.getElementById('add-night').disabled &&
		!document.getElementById('f-title').readOnly && !document.getElementById('f-ends_at').readOnly && !document.getElementById('f-per_user').readOnly &&
		document.getElementById('f-hotel').getAttribute('aria-describedby').includes('edit-locked')`) {
		t.Fatal("after the 409 the fields a started sale keeps are not locked (or the others are)")
	}
	if got := jsString(t, ctx, `document.getElementById('f-price').value + '|' + document.getElementById('f-title').value`); got != "39900|Soon, renamed" {
		t.Errorf("after the 409 the form holds %q, want the sale's price and the typed title", got)
	}
	if got := textOf(t, ctx, "#edit-locked"); !strings.Contains(got, "purchase tokens") {
		t.Errorf("the lock's sentence %q", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#create-submit")))
	pollJS(t, ctx, `document.getElementById('create').hidden`, 5*time.Second)
	if got := c.saleDetail(t, sid); got.Title != "Soon, renamed" || got.Price != 39900 {
		t.Fatalf("after the started sale's edit: %+v", got)
	}
	// Reopened once started: locked from the start.
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-edit")), visible("#edit-locked"))
	if !jsBool(t, ctx, `document.getElementById('f-room_type').readOnly && !document.getElementById('f-description').readOnly`) {
		t.Error("a started sale's form is not locked on opening")
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the edit form scrolls sideways at 360 px")
	}
}

// TestBrowserConsoleChanges: after a pause and a stock change from the
// dashboard, the change log lists them newest first with their revisions;
// an edit from elsewhere (the API) reaches the log when the revision
// moves, and the log speaks Chinese after the switch.
func TestBrowserConsoleChanges(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{3, 3}, 1, true))
	consoleSignIn(t, ctx, "http://"+m.Addr(), "#sale="+id)
	pollJS(t, ctx, `!!document.querySelector('#d-changes caption')`, 5*time.Second)
	if got := textOf(t, ctx, "#d-changes tbody"); !strings.Contains(got, "No changes") {
		t.Errorf("a new sale's log says %q", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-pause")))
	confirmDialog(t, ctx, true)
	runSteps(t, ctx, setInput("d-delta", "2"), chromedp.Click(chromedp.CSS("#d-add")))
	confirmDialog(t, ctx, true)
	kinds := `[...document.querySelectorAll('#d-changes tbody tr')].map(r => r.dataset.kind + ':' + r.dataset.revision).join()`
	pollJS(t, ctx, `document.querySelectorAll('#d-changes tbody tr').length === 2`, 5*time.Second)
	got := jsString(t, ctx, kinds)
	var k0, k1 string
	var r0, r1 int
	if n, _ := fmt.Sscanf(strings.ReplaceAll(got, ":", " "), "%s %d,%s %d", &k0, &r0, &k1, &r1); n != 4 || k0 != "stock" || k1 != "pause" || r0 <= r1 {
		t.Fatalf("change log %q, want the stock change then the pause, newest first", got)
	}
	if detail := textOf(t, ctx, "#d-changes tbody tr:first-child td:last-child"); !strings.Contains(detail, "+2") {
		t.Errorf("the stock change's detail %q", detail)
	}
	title := "Renamed elsewhere"
	if st, err := c.do(ctx, "PATCH", "/api/admin/sales/"+id, c.admin, map[string]any{"title": title}, nil, nil); err != nil || st != 200 {
		t.Fatalf("patch: %d %v", st, err)
	}
	pollJS(t, ctx, `document.querySelector('#d-changes tbody tr').dataset.kind === 'edit'`, 5*time.Second)
	if got := textOf(t, ctx, "#d-changes tbody tr:first-child td:last-child"); !strings.Contains(got, "title") {
		t.Errorf("the edit's detail %q", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#lang")))
	pollJS(t, ctx, `document.querySelector('#d-changes thead th').textContent === '时间' && document.querySelector('#d-changes tbody td:nth-child(2)').textContent === '编辑'`, 5*time.Second)
}

// TestBrowserConsoleOrders: 25 guests buy and two pay; the orders view
// shows the newest 20 with "more" for the rest, the paid filter shows the
// two, and the CSV (fetched with the token in the header, offered as a
// Blob) has a row for every order with its status.
func TestBrowserConsoleOrders(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{30}, 1, false))
	var ids []string
	for i := range 25 {
		st, o, err := c.purchase(ctx, id, fmt.Sprintf("guest-%02d", i), false, nil, "")
		if err != nil || st != 202 {
			t.Fatalf("purchase %d: %d %v", i, st, err)
		}
		ids = append(ids, o.OrderID)
	}
	paid := ids[:2]
	for _, oid := range paid {
		var (
			st  int
			err error
		)
		// Every 50 ms while the order is being written.
		if !testenv.Poll(5*time.Second, 50*time.Millisecond, func() bool {
			st, err = c.do(ctx, "POST", "/api/orders/"+oid+"/paid", c.admin, map[string]any{"payment_ref": "pay-" + oid}, nil, nil)
			return err == nil && st == 200
		}) {
			t.Fatalf("pay %s: %d %v", oid, st, err)
		}
	}
	consoleSignIn(t, ctx, "http://"+m.Addr(), "#sale="+id)
	rows := `document.querySelectorAll('#d-orders tbody tr[data-order]').length`
	pollJS(t, ctx, rows+` === 20 && !document.getElementById('o-more').hidden`, 10*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#o-more")))
	pollJS(t, ctx, rows+` === 25 && document.getElementById('o-more').hidden`, 5*time.Second)
	if got := textOf(t, ctx, "#o-msg"); !strings.Contains(got, "25 order") {
		t.Errorf("the orders' status line %q", got)
	}
	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#o-status"), "paid"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('o-status').dispatchEvent(new Event('change'))`))
	pollJS(t, ctx, rows+` === 2 && [...document.querySelectorAll('#d-orders tbody tr')].every(r => r.dataset.status === 'paid')`, 5*time.Second)
	shown := strings.Split(jsString(t, ctx, `[...document.querySelectorAll('#d-orders tbody tr')].map(r => r.dataset.order).join()`), ",")
	if !sameSet(shown, paid) {
		t.Errorf("paid filter shows %v, want %v", shown, paid)
	}

	// The CSV of every order: record the Blob the page offers.
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		window.offered = [];
		const make = URL.createObjectURL;
		URL.createObjectURL = (b) => { const u = make(b); window.offered.push({ blob: b, url: u }); return u; };
		const click = HTMLAnchorElement.prototype.click;
		HTMLAnchorElement.prototype.click = function () { window.offered.at(-1).name = this.download; window.offered.at(-1).href = this.href; };
		performance.setResourceTimingBufferSize(100000);
	})()`),
		chromedp.SetValue(chromedp.CSS("#o-status"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('o-status').dispatchEvent(new Event('change'))`))
	// The list reloads for the filter first: a click while it does was
	// lost once in CI (the button is redrawn with the list).
	pollJS(t, ctx, rows+` === 20 && !document.getElementById('o-more').hidden`, 5*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#o-csv")))
	pollJS(t, ctx, `window.offered.length === 1 && !!window.offered[0].name`, 10*time.Second)
	pollJS(t, ctx, `document.getElementById('o-msg').textContent.includes('25 order')`, 5*time.Second)
	if got := jsString(t, ctx, `window.offered[0].name + ' ' + window.offered[0].href.slice(0, 5)`); got != "orders-"+id+".csv blob:" {
		t.Errorf("offered %q, want a blob: download named orders-<id>.csv", got)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.offered[0].blob.text()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) != 26 || recs[0][0] != "order_id" || recs[0][2] != "status" {
		t.Fatalf("CSV (%v): %d records, header %v", err, len(recs), recs[:min(1, len(recs))])
	}
	var got, gotPaid []string
	for _, r := range recs[1:] {
		got = append(got, r[0])
		if r[2] == "paid" {
			gotPaid = append(gotPaid, r[0])
		}
	}
	if !sameSet(got, ids) || !sameSet(gotPaid, paid) {
		t.Errorf("CSV orders %v (paid %v), want %v (paid %v)", got, gotPaid, ids, paid)
	}
	if leaked := jsBool(t, ctx, fmt.Sprintf(`performance.getEntriesByType('resource').some(e => e.name.includes(%q))`, testAdminToken)); leaked {
		t.Error("the admin token is in a URL")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestBrowserConsoleTestSale: a test sale has its badge in the list and on
// its dashboard, with "delete test sale" (a real sale has neither); a
// cancelled confirmation deletes nothing, a confirmed one deletes it (204):
// it leaves the list and the admin API.
func TestBrowserConsoleTestSale(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	real := saleJSON([]int{3}, 1, true)
	real["title"] = "Real"
	rid := c.createSale(t, real)
	ts := saleJSON([]int{3}, 1, true)
	ts["title"] = "Load test"
	ts["test"] = true
	tid := c.createSale(t, ts)
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	row := func(id string) string { return fmt.Sprintf(`#sales tr[data-sale=%q]`, id) }
	runSteps(t, ctx, visible(row(tid)), visible(row(rid)))
	if !jsBool(t, ctx, fmt.Sprintf(`!!document.querySelector(%q) && !document.querySelector(%q)`, row(tid)+" .pill.test", row(rid)+" .pill.test")) {
		t.Fatal("the test badge is not on the test sale's row alone")
	}
	openSale(t, ctx, rid)
	if !jsBool(t, ctx, `document.getElementById('d-delete').hidden && !document.getElementById('d-test')`) {
		t.Error("a real sale offers deletion or carries the test badge")
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS(`#detail button.link`)))
	openSale(t, ctx, tid)
	pollJS(t, ctx, `!!document.getElementById('d-test') && !document.getElementById('d-delete').hidden`, 5*time.Second)
	if got := textOf(t, ctx, "#d-test"); got != "test" {
		t.Errorf("badge %q", got)
	}
	runSteps(t, ctx, chromedp.Focus(chromedp.CSS("#d-delete")), chromedp.KeyEvent("\r"))
	confirmDialog(t, ctx, false)
	if st, _ := c.do(ctx, "GET", "/api/admin/sales/"+tid, c.admin, nil, nil, nil); st != 200 {
		t.Fatalf("the test sale is %d after a cancelled deletion", st)
	}
	// Escape cancels too.
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-delete")), visible("#confirm"), chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.CSS("#confirm")))
	if st, _ := c.do(ctx, "GET", "/api/admin/sales/"+tid, c.admin, nil, nil, nil); st != 200 {
		t.Fatalf("the test sale is %d after a deletion cancelled by Escape", st)
	}
	// Issue 20: the cancelled dialog's close event is queued, not
	// dispatched as the operator acts; under CI's load it arrived after the
	// next question had opened and answered it "cancel", so the confirmed
	// deletion did nothing. One script holds that event back the same way:
	// ask, cancel and ask again before the event loop turns.
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('d-delete').click();
		document.getElementById('confirm-cancel').click();
		document.getElementById('d-delete').click();
	})()`))
	confirmDialog(t, ctx, true)
	pollJS(t, ctx, fmt.Sprintf(`document.getElementById('detail').hidden && !document.querySelector(%q) && document.getElementById('msg').textContent.includes('deleted')`, row(tid)), 5*time.Second)
	if st, _ := c.do(ctx, "GET", "/api/admin/sales/"+tid, c.admin, nil, nil, nil); st != 404 {
		t.Errorf("the deleted test sale is %d, want 404", st)
	}
	if id := jsString(t, ctx, `document.activeElement.id`); id != "list-title" {
		t.Errorf("focus on %q after the deletion, want the list's heading", id)
	}
	if !jsBool(t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, row(rid))) {
		t.Error("the real sale left the list too")
	}
}
