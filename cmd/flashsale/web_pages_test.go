package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// day is how the pages write test night i: "Thu, Dec 24" (en, UTC).
func day(i int) string { return testenv.NightTime(i).Format("Mon, Jan 2") }

// TestBrowserSalePageDetails (issue 23, item 9): the rooms left name their
// nights as the check-in menu does (they were ISO dates beside "Thu, Dec
// 24"); the total says what it multiplies ("1 × 2 × CN¥399.00" had no
// labels); a paid order shows its id and stay (it showed neither); and a
// sold-out sale's menus and total step back (they stayed active).
func TestBrowserSalePageDetails(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	base := "http://" + m.Addr()
	id := c.createSale(t, saleJSON([]int{3, 3}, 2, true))
	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+id), visible(`#state[data-state="ready"]`))
	if got, want := textOf(t, ctx, fmt.Sprintf(`#per-night li[data-date=%q]`, testenv.Night(0))), day(0)+": 3 left"; got != want {
		t.Errorf("rooms left %q, want %q", got, want)
	}
	if got := jsString(t, ctx, `document.getElementById('checkin').selectedOptions[0].textContent`); got != day(0) {
		t.Errorf("check-in menu says %q, the rooms left %q", got, day(0))
	}
	if got, want := textOf(t, ctx, "#amount"), "Total CN¥399.00: 1 room × 1 night × CN¥399.00 a night"; got != want {
		t.Errorf("total %q, want %q", got, want)
	}
	runSteps(t, ctx, chromedp.SetValue(chromedp.CSS("#nights"), "2"), chromedp.SetValue(chromedp.CSS("#rooms"), "2"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('rooms').dispatchEvent(new Event('change', {bubbles: true}))`))
	pollJS(t, ctx, `document.getElementById('amount').textContent === 'Total CN¥1,596.00: 2 rooms × 2 nights × CN¥399.00 a night'`, 3*time.Second)

	// Bought and paid (the demo's pay button): the receipt names the order.
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`),
		chromedp.Click(chromedp.CSS("#pay")), visible(`#state[data-state="paid"]`))
	receipt := textOf(t, ctx, "#hold")
	want := regexp.MustCompile(`^Order [0-9A-Z]{26} · ` + regexp.QuoteMeta(day(0)) + `, 2 nights, 2 rooms · CN¥1,596\.00$`)
	if !want.MatchString(receipt) {
		t.Errorf("paid order shows %q, want %s", receipt, want)
	}

	// Another sale, sold to someone else while the guest looks: nothing
	// left to choose.
	one := c.createSale(t, saleJSON([]int{1}, 1, true))
	runSteps(t, ctx, chromedp.Navigate(base+"/sales/"+one), visible(`#state[data-state="ready"]`))
	if jsBool(t, ctx, `document.getElementById('checkin').disabled || document.getElementById('amount').classList.contains('inactive')`) {
		t.Fatal("menus or total inactive on a sale with rooms")
	}
	if st, o, err := c.purchase(ctx, one, "bob", true, nil, ""); err != nil || st != 202 {
		t.Fatalf("bob's purchase: %d %v %+v", st, err, o)
	}
	runSteps(t, ctx, visible(`#state[data-state="sold_out"]`))
	pollJS(t, ctx, `['checkin', 'nights', 'rooms'].every((k) => document.getElementById(k).disabled) && document.getElementById('amount').classList.contains('inactive')`, 5*time.Second)
}

// TestBrowserHomeStayDates (issue 23, item 9): a card on the home page says
// which stay is on sale, first night to check-out (it did not).
func TestBrowserHomeStayDates(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = false })
	id := c.createSale(t, saleJSON([]int{2, 2}, 1, true))
	card := fmt.Sprintf(`#sales a[href="/sales/%s"] .stay-dates`, id)
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/"), visible(card))
	if got, want := textOf(t, ctx, card), "Stays "+day(0)+" – "+day(2); got != want {
		t.Errorf("card says %q, want %q", got, want)
	}
}

// TestBrowserConsoleLayout (issue 23, item 9), on a phone's width: every
// column's header sits as its cells do (the headers were right-aligned over
// left-aligned text), the funnel's bars carry their numbers, a sale's
// dashboard opens above the list rather than below all of it, and the
// dashboard with its orders does not overflow the screen.
func TestBrowserConsoleLayout(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	for range 6 { // a list long enough to push a dashboard below the fold
		c.createSale(t, saleJSON([]int{5}, 1, true))
	}
	id := c.createSale(t, saleJSON([]int{30}, 1, true))
	for i := range 3 {
		if st, o, err := c.purchase(ctx, id, fmt.Sprintf("guest-with-a-long-name-%d@example.com", i), true, nil, ""); err != nil || st != 202 {
			t.Fatalf("purchase: %d %v %+v", st, err, o)
		}
	}
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	open := fmt.Sprintf(`#sales button[data-open=%q]`, id)
	runSteps(t, ctx, visible(open), chromedp.Click(chromedp.CSS(open)), visible("#d-title"))
	pollJS(t, ctx, `document.querySelectorAll('#d-orders tbody tr[data-order]').length === 3`, 10*time.Second)
	pollJS(t, ctx, `document.querySelectorAll('#c-funnel text.value').length > 0`, 10*time.Second)

	if !jsBool(t, ctx, `document.getElementById('detail').getBoundingClientRect().top < document.getElementById('list').getBoundingClientRect().top`) {
		t.Error("the dashboard opened below the list")
	}
	// Each header's alignment is its column's: compare every th with the
	// cell under it, in every table the console draws.
	mismatch := jsString(t, ctx, `(() => {
		const out = [];
		for (const table of document.querySelectorAll('#dash table')) {
			const heads = table.querySelectorAll('thead th');
			const row = table.querySelector('tbody tr');
			if (!row) continue;
			heads.forEach((th, i) => {
				const cell = row.children[i];
				if (!cell || cell.colSpan > 1 || getComputedStyle(th.closest('thead')).position === 'absolute') return; // headers hidden: the rows are cards
				const a = getComputedStyle(th).textAlign, b = getComputedStyle(cell).textAlign;
				if (a !== b) out.push((table.id || table.className) + ': ' + th.textContent + ' ' + a + ' over ' + b);
			});
		}
		return out.join('; ');
	})()`)
	if mismatch != "" {
		t.Errorf("headers not aligned with their columns: %s", mismatch)
	}
	if got := jsString(t, ctx, `[...document.querySelectorAll('#c-funnel text.value')].map((e) => e.textContent).join()`); !regexp.MustCompile(`^\d+(,\d+)*$`).MatchString(got) || !strings.Contains(got, "3") {
		t.Errorf("funnel bar numbers %q, want one number per step, the purchases' 3 among them", got)
	}
	// The orders fit the screen: no sideways scrolling inside their frame
	// either (they did: a six-column table in a scrolling box).
	if !jsBool(t, ctx, `(() => { const w = document.getElementById('o-wrap'); return w.scrollWidth <= w.clientWidth + 1; })()`) {
		t.Errorf("the orders table is wider than a %s-px screen", jsString(t, ctx, `String(document.documentElement.clientWidth)`))
	}
	if over := jsString(t, ctx, `(() => {
		const w = document.documentElement.clientWidth;
		if (document.documentElement.scrollWidth <= w) return '';
		return [...document.querySelectorAll('#dash *')].filter((e) => e.getBoundingClientRect().right > w + 1 && !e.closest('.table-wrap'))
			.slice(0, 5).map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className).join(', ') || 'something';
	})()`); over != "" {
		t.Errorf("the dashboard overflows a %s-px screen: %s", jsString(t, ctx, `String(document.documentElement.clientWidth)`), over)
	}
}
