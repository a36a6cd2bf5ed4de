package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests of the console's actions on the sale lifecycle API and of
// what the guest page makes of them.

// confirmDialog answers the console's confirmation dialog.
func confirmDialog(t *testing.T, ctx context.Context, ok bool) {
	t.Helper()
	button := "#confirm-cancel"
	if ok {
		button = "#confirm-ok"
	}
	runSteps(t, ctx, visible("#confirm"), chromedp.Click(chromedp.CSS(button)), chromedp.WaitNotVisible(chromedp.CSS("#confirm")))
}

// nightStock is one night's stock and what is left of it, by the admin API.
func (c *client) nightStock(t *testing.T, id, date string) (stock, available int) {
	t.Helper()
	for _, n := range c.adminSale(t, id).Nights {
		if n.Date == date {
			return n.Stock, n.Available
		}
	}
	t.Fatalf("sale %s has no night %s", id, date)
	return 0, 0
}

// TestBrowserConsoleActions: the operator pauses a sale (after a cancelled
// confirmation that changes nothing), and a guest watching its page sees
// it paused without a reload and cannot buy; resumes it and the guest can;
// adds rooms to a night; tries to take back more rooms than are unheld
// (409 stock_in_use, in words, nothing changes) then fewer; closes it, and
// the guest page says it ended. The list's status filter finds it.
func TestBrowserConsoleActions(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	id := c.createSale(t, saleJSON([]int{3, 2}, 1, true))
	if st, _, err := c.purchase(ctx, id, "bob", true, nil, ""); err != nil || st != 202 {
		t.Fatalf("bob's purchase: %d %v", st, err)
	}

	guest, cancelGuest := chromedp.NewContext(ctx) // a second tab of the same browser
	defer cancelGuest()
	runSteps(t, guest, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))

	consoleSignIn(t, ctx, base, "#sale="+id)
	status := func(want string) {
		t.Helper()
		pollJS(t, ctx, fmt.Sprintf(`document.getElementById('d-title').dataset.status === %q`, want), 10*time.Second)
	}
	status("active")

	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-pause")))
	confirmDialog(t, ctx, false)
	if st := jsString(t, ctx, `document.getElementById('d-title').dataset.status`); st != "active" {
		t.Fatalf("status %q after a cancelled pause", st)
	}
	if id := jsString(t, ctx, `document.activeElement.id`); id != "d-pause" {
		t.Errorf("focus on %q after the dialog, want back on the pause button", id)
	}

	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-pause")))
	confirmDialog(t, ctx, true)
	status("paused")
	if !jsBool(t, ctx, `document.getElementById('d-pause').hidden && !document.getElementById('d-resume').hidden`) {
		t.Error("pause still offered on a paused sale")
	}
	if st, o, err := c.purchase(ctx, id, "carol", true, nil, ""); err != nil || st != 409 || o.Error.Code != "paused" {
		t.Fatalf("carol's purchase of a paused sale: %d %v %+v", st, err, o.Error)
	}
	runSteps(t, guest, visible(`#state[data-state="paused"]`))
	if !jsBool(t, guest, `document.getElementById('buy').disabled`) {
		t.Fatal("buy enabled on a paused sale")
	}

	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-resume")))
	confirmDialog(t, ctx, true)
	status("active")
	runSteps(t, guest, visible(`#state[data-state="ready"]`))

	// Rooms: 4 more on night 1; then 3 back from night 0, where bob holds
	// one of the 3, is refused; 2 back is not.
	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#d-night"), testenv.Night(1)), setInput("d-delta", "4"),
		chromedp.Click(chromedp.CSS("#d-add")))
	confirmDialog(t, ctx, true)
	pollJS(t, ctx, `document.getElementById('d-msg').textContent === 'Add rooms: done.'`, 5*time.Second)
	if stock, avail := c.nightStock(t, id, testenv.Night(1)); stock != 6 || avail != 6 {
		t.Fatalf("night 1 after adding 4: stock %d available %d, want 6 and 6", stock, avail)
	}
	pollJS(t, ctx, `[...document.querySelectorAll('#d-nights tr.total td')].map(td => td.textContent).join() === '9,8,1,0'`, 5*time.Second)

	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#d-night"), testenv.Night(0)), setInput("d-delta", "3"),
		chromedp.Click(chromedp.CSS("#d-remove")))
	confirmDialog(t, ctx, true)
	pollJS(t, ctx, `document.getElementById('d-msg').classList.contains('bad')`, 5*time.Second)
	if msg := textOf(t, ctx, "#d-msg"); !strings.Contains(msg, "only 2 rooms of "+testenv.Night(0)+" are free to take back") {
		t.Errorf("refused removal says %q", msg)
	}
	if stock, _ := c.nightStock(t, id, testenv.Night(0)); stock != 3 {
		t.Fatalf("night 0 after a refused removal: stock %d, want 3", stock)
	}
	runSteps(t, ctx, setInput("d-delta", "2"), chromedp.Click(chromedp.CSS("#d-remove")))
	confirmDialog(t, ctx, true)
	pollJS(t, ctx, `document.getElementById('d-msg').classList.contains('ok')`, 5*time.Second)
	if stock, avail := c.nightStock(t, id, testenv.Night(0)); stock != 1 || avail != 0 {
		t.Fatalf("night 0 after taking 2 back: stock %d available %d, want 1 and 0", stock, avail)
	}

	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#d-close")))
	confirmDialog(t, ctx, true)
	status("ended")
	if !jsBool(t, ctx, `document.getElementById('d-close').disabled && document.getElementById('d-pause').disabled`) {
		t.Error("close or pause still offered on an ended sale")
	}
	runSteps(t, guest, visible(`#state[data-state="ended"]`))

	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#filter"), "ended"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('filter').dispatchEvent(new Event('change'))`))
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector('#sales tr[data-sale=%q]') && document.querySelectorAll('#sales tbody tr').length === 1`, id), 5*time.Second)
	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#filter"), "paused"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('filter').dispatchEvent(new Event('change'))`))
	pollJS(t, ctx, `!document.querySelector('#sales tbody')`, 5*time.Second)
}

// tabTo presses Tab until the element with id has the focus, as a
// keyboard user walks a page; it fails after 15 presses.
func tabTo(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	for range 15 {
		runSteps(t, ctx, chromedp.KeyEvent("\t"))
		if jsString(t, ctx, `document.activeElement.id`) == id {
			return
		}
	}
	t.Fatalf("Tab never reached #%s", id)
}

// TestBrowserHoldExpires: a guest holds the last room and watches the
// payment window count down to expired; another guest, who saw it sold
// out, sees the room come back and can buy it, without a reload.
func TestBrowserHoldExpires(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{1}, 1, true)
	sale["hold_seconds"] = 4
	id := c.createSale(t, sale)
	page := "http://" + m.Addr() + "/sales/" + id
	other, cancel := chromedp.NewContext(ctx)
	defer cancel()
	runSteps(t, other, chromedp.Navigate(page), visible(`#state[data-state="ready"]`))

	runSteps(t, ctx, chromedp.Navigate(page), visible(`#state[data-state="ready"]`), chromedp.Click(chromedp.CSS("#buy")),
		visible(`#state[data-state="held"]`))
	if hold := textOf(t, ctx, "#hold"); !strings.Contains(hold, "Pay within 0:0") {
		t.Fatalf("hold line %q, want the 4 s window counting", hold)
	}
	runSteps(t, other, visible(`#state[data-state="sold_out"]`))
	if !jsBool(t, other, `document.getElementById('buy').disabled`) {
		t.Fatal("the other guest can buy the held room")
	}

	runSteps(t, ctx, visible(`#state[data-state="expired"]`))
	if hold := textOf(t, ctx, "#hold"); hold != "" {
		t.Errorf("hold line %q after the hold expired", hold)
	}
	runSteps(t, other, visible(`#left[data-left="1"]`), visible(`#state[data-state="ready"]`))
	if jsBool(t, other, `document.getElementById('buy').disabled`) {
		t.Fatal("the room came back but the other guest cannot buy it")
	}
	// The guest whose hold expired can buy again without a reload (issue
	// 23: the button stayed disabled until one).
	runSteps(t, ctx, visible(`#left[data-left="1"]`), chromedp.Poll[chromedp.Void](`!document.getElementById('buy').disabled`,
		chromedp.WithPollingTimeout(5*time.Second)), chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
	runSteps(t, other, visible(`#state[data-state="sold_out"]`))
}

// TestBrowserPayDemo: with the keyboard only, a guest buys a room and
// pays for it through the demo's pay button; the order is paid with the
// demo's payment_ref and the room counts as sold.
func TestBrowserPayDemo(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{2}, 1, true))
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`))
	tabTo(t, ctx, "buy")
	runSteps(t, ctx, chromedp.KeyEvent("\r"), visible(`#state[data-state="held"]`), visible("#pay"))
	tabTo(t, ctx, "pay")
	runSteps(t, ctx, chromedp.KeyEvent("\r"), visible(`#state[data-state="paid"]`))
	if !jsBool(t, ctx, `document.getElementById('pay').hidden && document.getElementById('cancel').hidden`) {
		t.Error("pay or cancel still offered on a paid order")
	}
	if got := jsString(t, ctx, `document.activeElement.id`); got != "state" {
		t.Errorf("focus on %q after paying, want the state line", got)
	}
	// A paid order is final: the page stops following it.
	pollJS(t, ctx, `sessionStorage.getItem('flashsale.order.' + location.pathname.split('/')[2]) === null`, 5*time.Second)
	var o struct {
		Status     string `json:"status"`
		PaymentRef string `json:"payment_ref"`
	}
	var list struct {
		Orders []struct {
			ID string `json:"order_id"`
		}
	}
	if st, err := c.do(ctx, "GET", "/api/admin/sales/"+id+"/orders", c.admin, nil, nil, &list); err != nil || st != 200 || len(list.Orders) != 1 {
		t.Fatalf("orders of the sale: %d %v %+v", st, err, list)
	}
	if st, err := c.do(ctx, "GET", "/api/orders/"+list.Orders[0].ID, c.admin, nil, nil, &o); err != nil || st != 200 ||
		o.Status != "paid" || o.PaymentRef != "demo-"+list.Orders[0].ID {
		t.Fatalf("the order: %d %v %+v", st, err, o)
	}
	if n := c.adminSale(t, id).Nights[0]; n.Sold != 1 || n.Held != 0 {
		t.Fatalf("night %+v, want 1 sold, none held", n)
	}
}

// TestBrowserCancelBuyAgain: a guest who cancels a hold can buy again
// without a reload (issue 23: the button stayed disabled until one), and
// the room they gave back is theirs to take.
func TestBrowserCancelBuyAgain(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, saleJSON([]int{1}, 1, true))
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`),
		chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`),
		chromedp.Click(chromedp.CSS("#cancel")), visible(`#state[data-state="cancelled"]`),
		visible(`#left[data-left="1"]`), chromedp.Poll[chromedp.Void](`!document.getElementById('buy').disabled`,
			chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
	var held int
	for _, n := range c.adminSale(t, id).Nights {
		held += n.Held
	}
	if held != 1 {
		t.Fatalf("%d rooms held after cancel and buy again, want 1", held)
	}
}

// TestBrowserTitleAndDays (issue 23, item 9): the tab names the sale (it
// was always "Flash sale") and a countdown over a day reads in days (it
// read "Ends in 167:56:15"), in both languages.
func TestBrowserTitleAndDays(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{2}, 1, true)
	sale["ends_at"] = time.Now().Add(7*24*time.Hour - time.Minute).Format(time.RFC3339)
	id := c.createSale(t, sale)
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`))
	if !jsBool(t, ctx, `document.title === 'Storm · Harbour View'`) {
		t.Errorf("tab title is not the sale's title and hotel")
	}
	if cd := textOf(t, ctx, "#countdown"); !strings.HasPrefix(cd, "Ends in 6 d 23:5") {
		t.Errorf("countdown %q, want it in days", cd)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#lang")), chromedp.Poll[chromedp.Void](`document.getElementById('countdown').textContent.startsWith('距结束 6 天 23:5')`,
		chromedp.WithPollingTimeout(3*time.Second)))
}
