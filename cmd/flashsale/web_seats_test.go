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

// Browser tests of the sales of shuttle seats (issue 25, kind seats): the
// guest page's departures (a departure's vehicles one choice, its seats
// the most left in one vehicle), the held order's departure and seats,
// and the console's form and nights table, a row per vehicle.

// seatsSaleJSON is a sale of kind seats in Asia/Shanghai on test night 1:
// a departure at each of times, minutes long, of vehicles vehicles of
// stock seats each; limit seats per guest.
func seatsSaleJSON(times []string, minutes, vehicles, stock, limit int) map[string]any {
	sale := saleJSON(nil, limit, true)
	var units []map[string]any
	for _, at := range times {
		for range vehicles {
			units = append(units, map[string]any{"date": testenv.Night(1), "time": at, "minutes": minutes, "stock": stock})
		}
	}
	sale["title"], sale["hotel"], sale["room_type"] = "Airport shuttle", "Harbour Shuttles", "Hotel to PVG"
	sale["kind"], sale["time_zone"], sale["nights"] = "seats", "Asia/Shanghai", units
	sale["price"], sale["original_price"], sale["currency"] = 6000, 9000, "CNY"
	return sale
}

// adminSeats reads the operators' view of a seats sale's vehicles.
func (c *client) adminSeats(t *testing.T, id string) []slotNight {
	t.Helper()
	var v struct {
		Kind   string      `json:"kind"`
		Nights []slotNight `json:"nights"`
	}
	if st, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &v); err != nil || st != 200 {
		t.Fatalf("admin sale %s: %d %v", id, st, err)
	}
	if v.Kind != "seats" {
		t.Fatalf("admin sale %s is of kind %q, want seats", id, v.Kind)
	}
	return v.Nights
}

// TestBrowserSeatsShuttle: an airport shuttle's departures at 09:00,
// 09:30, 10:00 and 10:30 (Asia/Shanghai, 45 minutes), each 2 vehicles of
// 8 seats. The page offers each departure once, with its 16 seats and the
// 8 a group can book together; the guest books 3 seats on 09:30: the held
// order says 09:30 and 3 seats, and the operators' view holds them in
// 09:30's first vehicle only. Two groups of 6 then fill 09:00 through the
// API, one per vehicle, 2 seats left in each: the page says so and offers
// at most 2 seats for 09:00, a group of 3 fitting in no single vehicle.
// The console's table names each vehicle's row ("09:30 · vehicle 1").
func TestBrowserSeatsShuttle(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	times := []string{"09:00", "09:30", "10:00", "10:30"}
	id := c.createSale(t, seatsSaleJSON(times, 45, 2, 8, 6))
	night := testenv.Night(1)
	early, mine := night+"T09:00", night+"T09:30"

	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`), visible("#slot-list label"))
	if got := options(t, ctx, "day"); got != night {
		t.Fatalf("days offered %q, want %q", got, night)
	}
	if got := jsString(t, ctx, `[...document.querySelectorAll('#slot-list .slot-time')].map(e => e.textContent).join()`); got != strings.Join(times, ",") {
		t.Fatalf("departures shown %q, want each once: %s", got, strings.Join(times, ","))
	}
	mineCSS := fmt.Sprintf(`#slot-list label[data-slot=%q]`, mine)
	if got := textOf(t, ctx, mineCSS); !strings.Contains(got, "45 min") || !strings.Contains(got, "16 seats left · up to 8 together") {
		t.Errorf("a departure says %q, want its 45 min, 16 seats left and 8 together", got)
	}
	if got := textOf(t, ctx, "#slot-zone"); !strings.Contains(got, "Asia/Shanghai") {
		t.Errorf("zone note %q", got)
	}
	if got := textOf(t, ctx, "#quantity-label"); got != "Seats" {
		t.Errorf("the quantity's label says %q", got)
	}

	runSteps(t, ctx, pickSlot(mine), choose("quantity", "3"))
	pollJS(t, ctx, `document.getElementById('amount').dataset.amount === '18000'`, 2*time.Second)
	if got := options(t, ctx, "quantity"); got != "1,2,3,4,5,6" {
		t.Errorf("seats offered %q, want 1 to the limit of 6", got)
	}
	if got := textOf(t, ctx, "#amount"); !strings.Contains(got, "3 seats") {
		t.Errorf("amount %q", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")))
	waitState(t, ctx, "held")
	booked := textOf(t, ctx, "#booked")
	if !strings.Contains(booked, "09:30") || !strings.Contains(booked, "3 seats") || !strings.Contains(booked, "Asia/Shanghai") {
		t.Errorf("the held order says %q, want 09:30 (Asia/Shanghai) and 3 seats", booked)
	}
	if got, want := attrOf(t, ctx, "#booked", "data-slot")+" "+attrOf(t, ctx, "#booked", "data-quantity"), mine+" 3"; got != want {
		t.Errorf("the held order is %q, want %q", got, want)
	}

	units := c.adminSeats(t, id)
	if len(units) != 8 {
		t.Fatalf("%d vehicles in the admin view, want 8", len(units))
	}
	for i, u := range units {
		want := 0
		if i == 2 { // 09:30's first vehicle
			want = 3
		}
		if u.Held != want || u.Available != 8-want {
			t.Errorf("vehicle %d (%s %s): held %d, available %d; want %d held", i, u.Date, u.Time, u.Held, u.Available, want)
		}
	}
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('%s .slot-left').textContent === '13 seats left · up to 8 together'`, mineCSS), 5*time.Second)

	// Two groups of 6 fill 09:00's vehicles to 2 seats each: the second
	// group does not fit in the first vehicle and takes the other.
	for i := range 2 {
		st, o, err := c.purchase(t.Context(), id, fmt.Sprintf("group-%d", i), true, map[string]any{"departure": early, "seats": 6}, "")
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("a group of 6 at %s: %d %v %+v", early, st, err, o.Error)
		}
	}
	units = c.adminSeats(t, id)
	if units[0].Available != 2 || units[1].Available != 2 {
		t.Fatalf("09:00's vehicles have %d and %d seats left, want 2 and 2", units[0].Available, units[1].Available)
	}
	earlyCSS := fmt.Sprintf(`#slot-list label[data-slot=%q]`, early)
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('%s').dataset.left === '2'`, earlyCSS), 5*time.Second)
	runSteps(t, ctx, pickSlot(early))
	pollJS(t, ctx, fmt.Sprintf(`document.querySelector('#slot-list input:checked').value === %q`, early), 2*time.Second)
	if got := options(t, ctx, "quantity"); got != "1,2" {
		t.Errorf("seats offered at 09:00 %q, want 1,2 (2 left in each vehicle)", got)
	}
	if got := textOf(t, ctx, earlyCSS+" .slot-left"); got != "4 seats left · up to 2 together" {
		t.Errorf("09:00 says %q", got)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the sale page scrolls sideways")
	}
	shoot(t, ctx, "sale-seats-shuttle")

	// The console names each vehicle's row.
	consoleSignIn(t, ctx, "http://"+m.Addr(), "#sale="+id)
	row := fmt.Sprintf(`#d-nights tr[data-slot=%q][data-vehicle="1"]`, mine)
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, row), 5*time.Second)
	if got, want := textOf(t, ctx, row+" th"), night+" 09:30 · vehicle 1"; got != want {
		t.Errorf("the vehicle's row says %q, want %q", got, want)
	}
	if got := textOf(t, ctx, row+` td[data-counter="held"]`); got != "3" {
		t.Errorf("09:30's first vehicle holds %q in the console, want 3", got)
	}
	if got := textOf(t, ctx, fmt.Sprintf(`#d-nights tr[data-slot=%q][data-vehicle="2"] td[data-counter="held"]`, mine)); got != "0" {
		t.Errorf("09:30's second vehicle holds %q in the console, want 0", got)
	}
	shoot(t, ctx, "console-seats")
}

// TestBrowserSeatsForm: the operator creates a shuttle's sale in the
// console's form. Choosing "Shuttle seats" turns the rows into departures
// (date, start, minutes, vehicles, seats per vehicle) with no stay rules;
// "Add a departure" starts where the last ends, with its vehicles. The
// sale is created of kind seats with a unit per vehicle (09:00 and 09:45,
// 2 vehicles of 8 each), and its dashboard names each vehicle's row.
func TestBrowserSeatsForm(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#new")), visible("#create"), choose("f-kind", "seats"))
	if got := textOf(t, ctx, "#add-night"); got != "Add a departure" {
		t.Errorf("the add button says %q", got)
	}
	if !jsBool(t, ctx, `!document.querySelector('#nights-rows .night-rules').checkVisibility() && document.querySelector('#nights-rows [data-part="vehicles"]').checkVisibility()`) {
		t.Error("a departure's row shows the stay rules, or no vehicles")
	}
	part := func(i int, name, v string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const e = document.querySelector('#nights-rows > .night-row:nth-child(%d) [data-part=%q]');
			e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true}));
		})()`, i+1, name, v))
	}
	start := time.Now().Add(time.Hour).Truncate(time.Minute)
	night := testenv.Night(1)
	runSteps(t, ctx,
		setInput("f-title", "Airport shuttle"), setInput("f-hotel", "Harbour Shuttles"), setInput("f-room_type", "Hotel to PVG"), setInput("f-time_zone", "Asia/Shanghai"),
		setInput("f-price", "6000"), setInput("f-original_price", "9000"), setInput("f-currency", "CNY"),
		setInput("f-starts_at", start.Format("2006-01-02T15:04:05")), setInput("f-ends_at", start.Add(2*time.Hour).Format("2006-01-02T15:04:05")),
		part(0, "date", night), part(0, "time", "09:00"), part(0, "minutes", "45"), part(0, "vehicles", "2"), part(0, "stock", "8"),
		chromedp.Click(chromedp.CSS("#add-night")))
	if got := jsString(t, ctx, `[...document.querySelectorAll('#nights-rows .night-row:nth-child(2) [data-part]')].filter(e => ['date','time','minutes','vehicles','stock'].includes(e.dataset.part)).map(e => e.dataset.part + '=' + e.value).join()`); got != "date="+night+",stock=8,time=09:45,minutes=45,vehicles=2" {
		t.Errorf("the added departure is %q, want 09:45 of 45 min, 2 vehicles of 8, the same day", got)
	}
	shoot(t, ctx, "console-form-seats")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), visible("#detail"))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Airport shuttle')`, 5*time.Second)
	id := strings.TrimPrefix(jsString(t, ctx, `location.hash`), "#sale=")
	units := c.adminSeats(t, id)
	var got []string
	for _, u := range units {
		got = append(got, fmt.Sprintf("%s %s %d %d", u.Date, u.Time, u.Minutes, u.Stock))
	}
	want := []string{night + " 09:00 45 8", night + " 09:00 45 8", night + " 09:45 45 8", night + " 09:45 45 8"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("created with units %q, want %q", got, want)
	}
	row := fmt.Sprintf(`#d-nights tr[data-slot=%q][data-vehicle="2"] th`, night+"T09:45")
	pollJS(t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, row), 5*time.Second)
	if got, want := textOf(t, ctx, row), night+" 09:45 · vehicle 2"; got != want {
		t.Errorf("the vehicle's row says %q, want %q", got, want)
	}
	if got := textOf(t, ctx, "#d-kind"); !strings.Contains(got, "shuttle seats in Asia/Shanghai") {
		t.Errorf("the dashboard says %q of the kind", got)
	}
	shoot(t, ctx, "console-seats-form")
}
