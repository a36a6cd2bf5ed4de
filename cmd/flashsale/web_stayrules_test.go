package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests of the stay rules (issue 25): the guest page offers only
// the stays a sale's nights allow, and the console shows each night's
// rules, closes and reopens a night at once, and takes rules in its form.

// options is the values of a select's options, comma-separated.
func options(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	return jsString(t, ctx, fmt.Sprintf(`[...document.getElementById(%q).options].map(o => o.value).join()`, id))
}

// choose picks a value in a select as a guest would (a change event follows).
func choose(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q; e.dispatchEvent(new Event('change')); })()`, id, v))
}

// nightRules sets night i's stay rules on a sale made by saleJSON.
func nightRules(sale map[string]any, i int, rules map[string]any) {
	n := sale["nights"].([]map[string]any)[i]
	for k, v := range rules {
		n[k] = v
	}
}

// stayBody is a purchase of one room for nights nights from night first.
func stayBody(first, nights int) map[string]any {
	return map[string]any{"check_in": testenv.Night(first), "nights": nights, "rooms": 1}
}

// TestBrowserStayRulesGuest: six nights of 5 rooms, night 0 with a
// min_stay of 2, night 1 closed to arrival, night 3 closed to departure,
// night 4 stop-sold. The stays the rules allow (stay.go's checkStay) are
// 2 or 4 nights from night 0 (3 would depart on night 3; 5 runs through
// night 4), 2 from night 2, 1 from night 3 and 1 from night 5: the
// check-in menu offers exactly nights 0, 2, 3 and 5, and each its lengths.
// A stay the menus would not offer (slipped into the menu by hand, as a
// page whose rules went stale would send it) is refused 409
// closed_to_departure, said with the server's message, and the menus are
// drawn again; the allowed 4-night stay is held. A sale whose every night
// is closed to arrival says plainly that no stay can be booked.
func TestBrowserStayRulesGuest(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	sale := saleJSON([]int{5, 5, 5, 5, 5, 5}, 2, true)
	sale["title"] = "Stay rules"
	nightRules(sale, 0, map[string]any{"min_stay": 2})
	nightRules(sale, 1, map[string]any{"closed_to_arrival": true})
	nightRules(sale, 3, map[string]any{"closed_to_departure": true})
	nightRules(sale, 4, map[string]any{"stop_sell": true})
	id := c.createSale(t, sale)
	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))

	night := testenv.Night
	if got, want := options(t, ctx, "checkin"), strings.Join([]string{night(0), night(2), night(3), night(5)}, ","); got != want {
		t.Fatalf("check-in offered %q, want %q", got, want)
	}
	for _, tt := range []struct {
		first int
		want  string
	}{{2, "2"}, {3, "1"}, {5, "1"}, {0, "2,4"}} {
		runSteps(t, ctx, choose("checkin", night(tt.first)))
		if got := options(t, ctx, "nights"); got != tt.want {
			t.Errorf("from night %d: nights offered %q, want %q", tt.first, got, tt.want)
		}
	}
	if got := textOf(t, ctx, "#stay-note"); !strings.Contains(got, "only the stays they allow are offered") {
		t.Errorf("stay note %q", got)
	}
	if got := textOf(t, ctx, fmt.Sprintf(`#per-night li[data-date=%q]`, night(4))); !strings.HasSuffix(got, ": closed") {
		t.Errorf("the stop-sold night says %q", got)
	}

	// A stay the rules refuse, sent anyway: 3 nights from night 0 would
	// depart on night 3.
	runSteps(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const n = document.getElementById('nights'); n.add(new Option('3', '3')); n.value = '3'; n.dispatchEvent(new Event('change')); })()`),
		chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="stay_rule"]`))
	if got := textOf(t, ctx, "#state"); !strings.Contains(got, "closed_to_departure") || !strings.Contains(got, night(3)) {
		t.Errorf("refusal says %q, want the rule and the night", got)
	}
	pollJS(t, ctx, `[...document.getElementById('nights').options].map(o => o.value).join() === '2,4'`, 2*time.Second)
	if !jsBool(t, ctx, `!document.getElementById('buy').disabled`) {
		t.Error("after a refused stay the guest cannot buy another")
	}

	runSteps(t, ctx, choose("nights", "4"))
	pollJS(t, ctx, `document.getElementById('amount').dataset.amount === '159600'`, 2*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
	v := c.adminSale(t, id)
	for i, n := range v.Nights {
		if want := map[bool]int{true: 1, false: 0}[i < 4]; n.Held != want {
			t.Errorf("night %d held %d, want %d (nights %+v)", i, n.Held, want, v.Nights)
		}
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the sale page scrolls sideways at 360 px")
	}
	shoot(t, ctx, "sale-stay-rules")

	// Nothing allowed: said plainly, nothing to choose or buy.
	closed := saleJSON([]int{5, 5}, 1, true)
	closed["title"] = "Closed"
	nightRules(closed, 0, map[string]any{"closed_to_arrival": true})
	nightRules(closed, 1, map[string]any{"closed_to_arrival": true})
	cid := c.createSale(t, closed)
	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+cid), visible(`#state[data-state="no_stay"]`))
	if got := textOf(t, ctx, "#stay-note"); !strings.Contains(got, "No stay can be booked") {
		t.Errorf("no-stay note %q", got)
	}
	if got := options(t, ctx, "checkin"); got != "" {
		t.Errorf("check-in offered %q on a sale that allows no stay", got)
	}
	if !jsBool(t, ctx, `document.getElementById('buy').disabled && document.getElementById('checkin').disabled`) {
		t.Error("buy or the menus enabled with no stay allowed")
	}
}

// TestBrowserStayRulesStopSell: four nights, the last closed to arrival.
// The console's nights table shows each night's rules ("CTA", "–"); the
// operator clicks Stop sell on night 1 and the table says it is closed.
// The API then refuses a stay through night 1 with 409 stop_sell, and a
// guest page loaded afresh offers check-in on nights 0 and 2 only, one
// night from night 0. Reopen puts night 1 back: bought through the API,
// and offered again on the guest page.
func TestBrowserStayRulesStopSell(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	sale := saleJSON([]int{5, 5, 5, 5}, 2, true)
	sale["title"] = "Stop sell"
	nightRules(sale, 3, map[string]any{"closed_to_arrival": true})
	id := c.createSale(t, sale)
	night := testenv.Night
	row := func(i int) string { return fmt.Sprintf(`#d-nights tr[data-night=%q]`, night(i)) }
	button := func(i int) string { return fmt.Sprintf(`#d-nights button[data-night=%q]`, night(i)) }

	consoleSignIn(t, ctx, base, "#sale="+id)
	runSteps(t, ctx, visible(button(1)))
	if got := textOf(t, ctx, row(3)+" td.rules"); got != "CTA" {
		t.Errorf("night 3's rules say %q, want CTA", got)
	}
	if got := textOf(t, ctx, row(1)+" td.rules"); got != "–" {
		t.Errorf("night 1's rules say %q, want none", got)
	}
	if got := textOf(t, ctx, button(1)); got != "Stop sell" {
		t.Errorf("night 1's button says %q", got)
	}
	// The row, its rules and its button say so.
	closedRow := fmt.Sprintf(`document.querySelector(%q).dataset.stopSell === 'true' && document.querySelector(%q).textContent === 'closed' && document.querySelector(%q).textContent === 'Reopen'`,
		row(1), row(1)+" td.rules", button(1))
	runSteps(t, ctx, chromedp.Click(chromedp.CSS(button(1))))
	pollJS(t, ctx, closedRow, 5*time.Second)
	if got := textOf(t, ctx, "#d-msg"); !strings.Contains(got, "done") {
		t.Errorf("the outcome says %q", got)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the console scrolls sideways at 360 px")
	}
	shoot(t, ctx, "console-stop-sell")

	st, o, err := c.purchase(ctx, id, "bob", true, stayBody(0, 2), "")
	if err != nil || st != http.StatusConflict || o.Error.Code != "stop_sell" || !strings.Contains(o.Error.Message, night(1)) {
		t.Fatalf("a stay through the closed night: %d %v %+v, want 409 stop_sell naming %s", st, err, o.Error, night(1))
	}

	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))
	if got, want := options(t, ctx, "checkin"), night(0)+","+night(2); got != want {
		t.Errorf("check-in offered %q with night 1 closed, want %q", got, want)
	}
	runSteps(t, ctx, choose("checkin", night(0)))
	if got := options(t, ctx, "nights"); got != "1" {
		t.Errorf("from night 0: nights offered %q with night 1 closed, want 1", got)
	}

	// Back to the console: this tab's session keeps the operator signed in.
	runSteps(t, ctx, chromedp.Navigate(base+"/console#sale="+id), visible("#dash"))
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector(%q).textContent === 'Reopen'`, button(1)), 10*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS(button(1))))
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector(%q).dataset.stopSell === 'false' && document.querySelector(%q).textContent === '–' && document.querySelector(%q).textContent === 'Stop sell'`,
		row(1), row(1)+" td.rules", button(1)), 5*time.Second)

	st, o, err = c.purchase(ctx, id, "carol", true, stayBody(0, 2), "")
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("a stay through the reopened night: %d %v %+v", st, err, o.Error)
	}
	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))
	if got, want := options(t, ctx, "checkin"), strings.Join([]string{night(0), night(1), night(2)}, ","); got != want {
		t.Errorf("check-in offered %q after Reopen, want %q", got, want)
	}
	runSteps(t, ctx, choose("checkin", night(0)))
	if got := options(t, ctx, "nights"); got != "1,2,3,4" {
		t.Errorf("from night 0: nights offered %q after Reopen, want 1,2,3,4", got)
	}
}

// TestBrowserStayRulesForm: the create form's nights take stay rules. It
// names the rules the server would refuse (a max below the min, closed to
// departure on the first night) at their row, opening its rules, and sends
// nothing; fixed, the sale is created with the rules and its dashboard
// shows them.
func TestBrowserStayRulesForm(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	before := len(c.adminSales(t))
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#new")), visible("#create"), chromedp.Click(chromedp.CSS("#add-night")))
	start := time.Now().Add(time.Hour).Truncate(time.Minute)
	runSteps(t, ctx,
		setInput("f-title", "Ruled"), setInput("f-hotel", "Harbour View"), setInput("f-room_type", "Deluxe King"),
		setInput("f-price", "39900"), setInput("f-original_price", "69900"),
		setInput("f-starts_at", start.Format("2006-01-02T15:04:05")), setInput("f-ends_at", start.Add(2*time.Hour).Format("2006-01-02T15:04:05")))
	// rule sets row i's rule input (a number's value, a switch's state).
	rule := func(i int, part string, v any) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const e = document.querySelector('#nights-rows > .night-row:nth-child(%d) [data-part=%q]');
			if (e.type === 'checkbox') e.checked = %v; else e.value = %q;
			e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true}));
		})()`, i+1, part, v == true, fmt.Sprint(v)))
	}
	inRow := func(i int, css string) string {
		return fmt.Sprintf(`#nights-rows > .night-row:nth-child(%d) %s`, i+1, css)
	}
	submit := chromedp.Click(chromedp.CSS(`#create button[type="submit"]`))
	runSteps(t, ctx, rule(0, "closed_to_departure", true), rule(1, "min_stay", 3), rule(1, "max_stay", 2), submit, visible("#create-errors"))
	if got := textOf(t, ctx, inRow(0, ".err")); !strings.Contains(got, "can never apply") {
		t.Errorf("night 1's error %q, want closed to departure's", got)
	}
	if got := textOf(t, ctx, inRow(1, ".err")); !strings.Contains(got, "below min nights") {
		t.Errorf("night 2's error %q, want max below min", got)
	}
	if got := attrOf(t, ctx, inRow(1, `[data-part="max_stay"]`), "aria-invalid"); got != "true" {
		t.Errorf("max nights aria-invalid %q", got)
	}
	if !jsBool(t, ctx, `[...document.querySelectorAll('#nights-rows .night-rules')].every(d => d.open)`) {
		t.Error("a row's rules stayed closed over its error")
	}
	if n := len(c.adminSales(t)); n != before {
		t.Fatalf("%d sales after refused rules, want %d", n, before)
	}
	if got := textOf(t, ctx, inRow(1, "summary")); got != "Stay rules: min 3 · max 2" {
		t.Errorf("night 2's rules summary %q", got)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the form scrolls sideways at 360 px with the rules open")
	}
	shoot(t, ctx, "console-form-stay-rules")

	runSteps(t, ctx, rule(0, "closed_to_departure", false), rule(0, "min_stay", 2), rule(1, "min_stay", ""), rule(1, "max_stay", ""),
		rule(1, "closed_to_departure", true), submit, visible("#detail"))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Ruled')`, 5*time.Second)
	id := strings.TrimPrefix(jsString(t, ctx, `location.hash`), "#sale=")
	var got struct {
		Nights []struct {
			Date              string `json:"date"`
			MinStay           int    `json:"min_stay"`
			ClosedToDeparture bool   `json:"closed_to_departure"`
		} `json:"nights"`
	}
	if st, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &got); err != nil || st != 200 {
		t.Fatalf("the created sale: %d %v", st, err)
	}
	if len(got.Nights) != 2 || got.Nights[0].MinStay != 2 || got.Nights[0].ClosedToDeparture || got.Nights[1].MinStay != 0 || !got.Nights[1].ClosedToDeparture {
		t.Fatalf("created with nights %+v, want min 2 on the first and closed to departure on the second", got.Nights)
	}
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('#d-nights tr[data-night=%q] td.rules').textContent === 'min 2'`, got.Nights[0].Date), 5*time.Second)
	if got := textOf(t, ctx, fmt.Sprintf(`#d-nights tr[data-night=%q] td.rules`, got.Nights[1].Date)); got != "CTD" {
		t.Errorf("the second night's rules say %q, want CTD", got)
	}
}
