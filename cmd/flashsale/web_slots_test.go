package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Browser tests of the sales of time slots (issue 25, kind slot): the
// guest page's day, slot and quantity in place of the stay's menus, the
// held order's slot, and the console's form and nights table for them.

// slotSaleJSON is a sale of kind slot in Europe/Paris: on each test night
// of days, a slot at each of times, minutes long (0: none), of stock
// places; limit places per guest.
func slotSaleJSON(title string, days []int, times []string, minutes, stock, limit int) map[string]any {
	sale := saleJSON(nil, limit, true)
	var slots []map[string]any
	for _, d := range days {
		for _, at := range times {
			s := map[string]any{"date": testenv.Night(d), "time": at, "stock": stock}
			if minutes > 0 {
				s["minutes"] = minutes
			}
			slots = append(slots, s)
		}
	}
	sale["title"], sale["hotel"], sale["room_type"] = title, "Le Jardin", "Tasting menu"
	sale["kind"], sale["time_zone"], sale["nights"] = "slot", "Europe/Paris", slots
	sale["price"], sale["original_price"], sale["currency"] = 9000, 12000, "EUR"
	return sale
}

// slotNight is one slot of the operators' view of a slot sale.
type slotNight struct {
	Date, Time                   string
	Minutes                      int
	Stock, Available, Held, Sold int
}

// adminSlots reads the operators' view of a slot sale's slots.
func (c *client) adminSlots(t *testing.T, id string) []slotNight {
	t.Helper()
	var v struct {
		Kind   string      `json:"kind"`
		Nights []slotNight `json:"nights"`
	}
	if st, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &v); err != nil || st != 200 {
		t.Fatalf("admin sale %s: %d %v", id, st, err)
	}
	if v.Kind != "slot" {
		t.Fatalf("admin sale %s is of kind %q, want slot", id, v.Kind)
	}
	return v.Nights
}

// waitState waits up to 10 s for the page's state, saying the one it
// shows instead if it does not come.
func waitState(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got := attrOf(t, ctx, "#state", "data-state"); got == want {
			return
		} else if time.Now().After(end) {
			t.Fatalf("the page is %s (%q), want %s", got, textOf(t, ctx, "#state"), want)
		}
	}
}

// pickSlot clicks a slot's label, as a guest taps it.
func pickSlot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(fmt.Sprintf(`#slot-list label[data-slot=%q]`, name)))
}

// TestBrowserSlotRestaurant: a restaurant's three services a day (12:00,
// 19:00, 21:30 in Europe/Paris, 40 covers each) over two days, seen from a
// phone set to Asia/Shanghai: the page offers the two days, says the zone
// once, and shows each service at its Paris time (never the phone's, 7
// hours on). The guest picks day 2's dinner for 4: the total is four
// covers, the held order says 19:00 and 4 guests, and the operators' view
// holds 4 covers of that service and of no other. The stay's menus are not
// shown.
func TestBrowserSlotRestaurant(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	id := c.createSale(t, slotSaleJSON("Christmas dinners", []int{0, 1}, []string{"12:00", "19:00", "21:30"}, 0, 40, 8))
	night := testenv.Night
	dinner := night(1) + "T19:00"

	runSteps(t, ctx,
		cdpDo(emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"}),
		chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`), visible("#slot-list label"))
	if !jsBool(t, ctx, `Intl.DateTimeFormat().resolvedOptions().timeZone === 'Asia/Shanghai'`) {
		t.Fatal("the page's zone is not Shanghai's: the test proves nothing")
	}
	if got, want := options(t, ctx, "day"), night(0)+","+night(1); got != want {
		t.Fatalf("days offered %q, want %q", got, want)
	}
	if got := textOf(t, ctx, "#slot-zone"); !strings.Contains(got, "Times in Europe/Paris") {
		t.Errorf("zone note %q", got)
	}
	if !jsBool(t, ctx, `document.getElementById('stay').hidden && document.getElementById('per-night').hidden && !document.getElementById('slots').hidden`) {
		t.Error("a slot sale shows the stay's menus")
	}
	if got := jsString(t, ctx, `[...document.querySelectorAll('#slot-list .slot-time')].map(e => e.textContent).join()`); got != "12:00,19:00,21:30" {
		t.Fatalf("day 1's services %q, want 12:00,19:00,21:30 (Paris time)", got)
	}
	if got := textOf(t, ctx, fmt.Sprintf(`#slot-list label[data-slot=%q] .slot-left`, night(0)+"T19:00")); got != "40 left" {
		t.Errorf("a service's places say %q", got)
	}

	runSteps(t, ctx, choose("day", night(1)), pickSlot(dinner), choose("quantity", "4"))
	pollJS(t, ctx, `document.getElementById('amount').dataset.amount === '36000'`, 2*time.Second)
	if got := options(t, ctx, "quantity"); got != "1,2,3,4,5,6,7,8" {
		t.Errorf("quantities offered %q, want 1 to the limit of 8", got)
	}
	if got := textOf(t, ctx, "#amount"); !strings.Contains(got, "4 guests") {
		t.Errorf("amount %q", got)
	}
	shoot(t, ctx, "sale-slots-restaurant")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")))
	waitState(t, ctx, "held")
	booked := textOf(t, ctx, "#booked")
	if !strings.Contains(booked, "19:00") || !strings.Contains(booked, "4 guests") || !strings.Contains(booked, "Europe/Paris") {
		t.Errorf("the held order says %q, want 19:00 (Europe/Paris) and 4 guests", booked)
	}
	if got, want := attrOf(t, ctx, "#booked", "data-slot")+" "+attrOf(t, ctx, "#booked", "data-quantity"), dinner+" 4"; got != want {
		t.Errorf("the held order is %q, want %q", got, want)
	}

	slots := c.adminSlots(t, id)
	if len(slots) != 6 {
		t.Fatalf("%d slots in the admin view, want 6", len(slots))
	}
	for _, s := range slots {
		want := 0
		if s.Date+"T"+s.Time == dinner {
			want = 4
		}
		if s.Held != want || s.Available != 40-want {
			t.Errorf("slot %s %s: held %d, available %d; want %d held", s.Date, s.Time, s.Held, s.Available, want)
		}
	}
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('#slot-list label[data-slot=%q] .slot-left').textContent === '36 left'`, dinner), 5*time.Second)
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the sale page scrolls sideways at 360 px")
	}
	shoot(t, ctx, "sale-slots-held")

	// The list's card says the days of the slots, not a stay's check-out.
	card := fmt.Sprintf(`a[href$=%q] .stay-dates`, id)
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/"), visible(card))
	if got := textOf(t, ctx, card); !strings.HasPrefix(got, "Times ") {
		t.Errorf("the list's card says %q of the slots", got)
	}
}

// TestBrowserSlotSpa: a spa's appointments every 30 minutes from 09:00 to
// 11:30, 60 minutes each, 3 therapists, one place per guest. The 10:00
// appointment's three places are bought through the API first: the page
// shows it sold out and it cannot be picked (a tap leaves the choice
// where it was). The guest books 10:30: the quantity menu offers just 1,
// and the held order says 10:30 and 1 guest.
func TestBrowserSlotSpa(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	times := []string{"09:00", "09:30", "10:00", "10:30", "11:00", "11:30"}
	sale := slotSaleJSON("Massage morning", []int{0}, times, 60, 3, 1)
	sale["hotel"], sale["room_type"] = "Spa Lumière", "Massage, 60 min"
	id := c.createSale(t, sale)
	night := testenv.Night
	full, mine := night(0)+"T10:00", night(0)+"T10:30"
	for i := range 3 {
		st, o, err := c.purchase(t.Context(), id, fmt.Sprintf("guest-%d", i), true, map[string]any{"slot": full, "quantity": 1}, "")
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("buy a place at %s: %d %v %+v", full, st, err, o.Error)
		}
	}

	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`), visible("#slot-list label"))
	if got := jsString(t, ctx, `[...document.querySelectorAll('#slot-list label')].map(l => l.dataset.slot.slice(11) + (l.dataset.full ? '!' : '')).join()`); got != "09:00,09:30,10:00!,10:30,11:00,11:30" {
		t.Fatalf("slots shown %q, want the six with 10:00 sold out", got)
	}
	fullCSS := fmt.Sprintf(`#slot-list label[data-slot=%q]`, full)
	if got := textOf(t, ctx, fullCSS); !strings.Contains(got, "Sold out") {
		t.Errorf("the sold-out slot says %q", got)
	}
	if got := textOf(t, ctx, fmt.Sprintf(`#slot-list label[data-slot=%q]`, mine)); !strings.Contains(got, "60 min") || !strings.Contains(got, "3 left") {
		t.Errorf("an open slot says %q, want its 60 min and 3 left", got)
	}
	if !jsBool(t, ctx, fmt.Sprintf(`document.querySelector('%s input').disabled`, fullCSS)) {
		t.Error("the sold-out slot can be picked")
	}
	before := jsString(t, ctx, `document.querySelector('#slot-list input:checked').value`)
	runSteps(t, ctx, pickSlot(full))
	if got := jsString(t, ctx, `document.querySelector('#slot-list input:checked').value`); got != before {
		t.Errorf("a tap on the sold-out slot chose %q", got)
	}
	if got := options(t, ctx, "quantity"); got != "1" {
		t.Errorf("quantities offered %q, want just 1", got)
	}

	runSteps(t, ctx, pickSlot(mine))
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('#slot-list input:checked').value === %q`, mine), 2*time.Second)
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")))
	waitState(t, ctx, "held")
	if got := textOf(t, ctx, "#booked"); !strings.Contains(got, "10:30") || !strings.Contains(got, "1 guest") {
		t.Errorf("the held order says %q, want 10:30 and 1 guest", got)
	}
	for _, s := range c.adminSlots(t, id) {
		want := map[string]int{full: 3, mine: 1}[s.Date+"T"+s.Time]
		if s.Held != want || s.Minutes != 60 {
			t.Errorf("slot %s %s: held %d, minutes %d; want %d held, 60 min", s.Date, s.Time, s.Held, s.Minutes, want)
		}
	}
	shoot(t, ctx, "sale-slots-spa")
}

// TestBrowserSlotForm: the operator creates a restaurant's slot sale in
// the console's form. Choosing "Time slots" turns the nights into slot
// rows (date, start, minutes, places) and hides the stay rules; with the
// time zone emptied the form names it as required and sends nothing.
// Filled in, the sale is created of kind slot in Europe/Paris with its two
// slots (12:00, and 19:00 of 120 minutes, added with "Add a slot"), listed,
// and its dashboard's table shows each slot's date, start and length
// beside its counters, with no stay rules or Stop sell.
func TestBrowserSlotForm(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	before := len(c.adminSales(t))
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#new")), visible("#create"), choose("f-kind", "slot"))
	if got := textOf(t, ctx, "#add-night"); got != "Add a slot" {
		t.Errorf("the add button says %q", got)
	}
	if !jsBool(t, ctx, `!document.querySelector('#nights-rows .night-rules').checkVisibility() && document.querySelector('#nights-rows [data-part="time"]').checkVisibility()`) {
		t.Error("a slot row shows the stay rules, or no start")
	}
	// part sets row i's input part.
	part := func(i int, name, v string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const e = document.querySelector('#nights-rows > .night-row:nth-child(%d) [data-part=%q]');
			e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true}));
		})()`, i+1, name, v))
	}
	start := time.Now().Add(time.Hour).Truncate(time.Minute)
	night := testenv.Night
	runSteps(t, ctx,
		setInput("f-title", "Dinners"), setInput("f-hotel", "Le Jardin"), setInput("f-room_type", "Tasting menu"), setInput("f-time_zone", ""),
		setInput("f-price", "9000"), setInput("f-original_price", "12000"), setInput("f-currency", "EUR"),
		setInput("f-starts_at", start.Format("2006-01-02T15:04:05")), setInput("f-ends_at", start.Add(2*time.Hour).Format("2006-01-02T15:04:05")),
		part(0, "date", night(0)), part(0, "time", "12:00"), part(0, "stock", "40"),
		chromedp.Click(chromedp.CSS("#add-night")))
	if got := jsString(t, ctx, `[...document.querySelectorAll('#nights-rows [data-part="date"], #nights-rows [data-part="time"]')].map(e => e.value).join()`); got != night(0)+",12:00,"+night(0)+",13:00" {
		t.Errorf("the added slot is %q, want the same day an hour on", got)
	}
	runSteps(t, ctx, part(1, "time", "19:00"), part(1, "minutes", "120"),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), visible("#create-errors"))
	if got := textOf(t, ctx, "#e-time_zone"); !strings.Contains(got, "need the venue") {
		t.Errorf("the time zone's error %q, want it required", got)
	}
	if n := len(c.adminSales(t)); n != before {
		t.Fatalf("%d sales after a form without its time zone, want %d", n, before)
	}
	shoot(t, ctx, "console-form-slots")

	runSteps(t, ctx, setInput("f-time_zone", "Europe/Paris"), chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), visible("#detail"))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Dinners')`, 5*time.Second)
	id := strings.TrimPrefix(jsString(t, ctx, `location.hash`), "#sale=")
	slots := c.adminSlots(t, id)
	if len(slots) != 2 || slots[0].Time != "12:00" || slots[0].Minutes != 0 || slots[0].Stock != 40 ||
		slots[1].Date != night(0) || slots[1].Time != "19:00" || slots[1].Minutes != 120 || slots[1].Stock != 40 {
		t.Fatalf("created with slots %+v", slots)
	}
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector('#sales tr[data-sale=%q]')`, id), 5*time.Second)
	row := fmt.Sprintf(`#d-nights tr[data-slot=%q]`, night(0)+"T19:00")
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, row), 5*time.Second)
	if got, want := textOf(t, ctx, row+" th"), night(0)+" 19:00 · 120 min"; got != want {
		t.Errorf("the slot's row says %q, want %q", got, want)
	}
	if got := textOf(t, ctx, fmt.Sprintf(`#d-nights tr[data-slot=%q] th`, night(0)+"T12:00")); got != night(0)+" 12:00" {
		t.Errorf("the lunch's row says %q", got)
	}
	if !jsBool(t, ctx, `!document.querySelector('#d-nights button.night-sell, #d-nights td.rules') && document.getElementById('d-rooms').hidden`) {
		t.Error("a slot sale's dashboard offers stay rules, Stop sell or rooms by date")
	}
	if got := textOf(t, ctx, "#d-kind"); !strings.Contains(got, "Europe/Paris") {
		t.Errorf("the dashboard says %q of the kind", got)
	}
	shoot(t, ctx, "console-slots")
}
