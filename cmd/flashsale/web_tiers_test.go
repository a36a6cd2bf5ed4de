package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
)

// Browser tests of price tiers: the guest page shows them and prices the
// rooms chosen; the console's form takes them, checked as the server
// checks them.

// TestBrowserPriceTiers: a sale of 399 a room-night, 349 from 2 rooms and
// 329 from 3, at most 3 rooms a guest. The page lists the tiers, offers 1
// to 3 rooms, prices 2 rooms for 2 nights at the 2-room tier (1396), and
// buys exactly that: 2 rooms on each night held, an order of that amount.
func TestBrowserPriceTiers(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	sale := saleJSON([]int{5, 5}, 3, true)
	sale["title"] = "Tiers"
	sale["price_tiers"] = []map[string]any{{"rooms": 2, "price": 34900}, {"rooms": 3, "price": 32900}}
	id := c.createSale(t, sale)
	runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`))

	if got := textOf(t, ctx, "#tiers"); !strings.Contains(got, "2+ rooms: CN¥349.00 per night") || !strings.Contains(got, "3+ rooms: CN¥329.00") {
		t.Errorf("tiers %q", got)
	}
	if got := jsString(t, ctx, `[...document.getElementById('rooms').options].map(o => o.value).join()`); got != "1,2,3" {
		t.Errorf("rooms offered %q, want 1 to the per-guest limit", got)
	}
	if got := attrOf(t, ctx, "#amount", "data-amount"); got != "39900" {
		t.Errorf("one room, one night: amount %q", got)
	}
	runSteps(t, ctx,
		chromedp.SetValue(chromedp.CSS("#nights"), "2"), chromedp.Evaluate[chromedp.Void](`document.getElementById('nights').dispatchEvent(new Event('change'))`),
		chromedp.SetValue(chromedp.CSS("#rooms"), "2"), chromedp.Evaluate[chromedp.Void](`document.getElementById('rooms').dispatchEvent(new Event('change'))`))
	pollJS(t, ctx, `document.getElementById('amount').dataset.amount === '139600'`, 2*time.Second)
	if got := textOf(t, ctx, "#amount"); !strings.Contains(got, "CN¥1,396.00") || !strings.Contains(got, "2 rooms × 2 nights × CN¥349.00") {
		t.Errorf("amount line %q", got)
	}
	if got := attrOf(t, ctx, "#amount", "aria-live"); got != "polite" {
		t.Errorf("the amount is not announced: aria-live %q", got)
	}
	if !jsBool(t, ctx, `!!document.querySelector('label[for="rooms"]')`) {
		t.Error("the rooms selector has no label")
	}

	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
	if got := textOf(t, ctx, "#hold"); !strings.Contains(got, "CN¥1,396.00") {
		t.Errorf("hold line %q, want the tier's amount", got)
	}
	v := c.adminSale(t, id)
	if len(v.Nights) != 2 || v.Nights[0].Held != 2 || v.Nights[1].Held != 2 {
		t.Fatalf("held %+v, want 2 rooms on each night", v.Nights)
	}
	orderID := jsString(t, ctx, fmt.Sprintf(`sessionStorage.getItem('flashsale.order.' + %q)`, id))
	var order struct {
		Amount int64 `json:"amount"`
		Rooms  int   `json:"rooms"`
	}
	if st, err := c.do(ctx, "GET", "/api/orders/"+orderID, c.admin, nil, nil, &order); err != nil || st != 200 || order.Amount != 139600 || order.Rooms != 2 {
		t.Fatalf("order %q: %d %v %+v, want 2 rooms for 139600", orderID, st, err, order)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the sale page scrolls sideways at 360 px")
	}

	// In Chinese.
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#lang")))
	pollJS(t, ctx, `document.getElementById('tiers').textContent.includes('2 间起')`, 2*time.Second)
	if got := textOf(t, ctx, "#amount"); !strings.Contains(got, "合计") {
		t.Errorf("Chinese amount line %q", got)
	}
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#lang"))) // back to English for the next test in this browser
}

// TestBrowserConsoleTiers: the create form refuses tiers the server would
// (rooms not going up from 2 to the per-guest limit, a price not below the
// one before), each named at the tiers field, sends nothing, and creates
// the sale with the tiers once they are right.
func TestBrowserConsoleTiers(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	before := len(c.adminSales(t))
	consoleSignIn(t, ctx, "http://"+m.Addr(), "")
	runSteps(t, ctx, chromedp.Click(chromedp.CSS("#new")), visible("#create"))
	start := time.Now().Add(time.Hour).Truncate(time.Minute)
	runSteps(t, ctx,
		setInput("f-title", "Tiered"), setInput("f-hotel", "Harbour View"), setInput("f-room_type", "Deluxe King"),
		setInput("f-price", "39900"), setInput("f-original_price", "69900"), setInput("f-per_user_limit", "3"),
		setInput("f-starts_at", start.Format("2006-01-02T15:04:05")), setInput("f-ends_at", start.Add(2*time.Hour).Format("2006-01-02T15:04:05")))
	submit := chromedp.Click(chromedp.CSS(`#create button[type="submit"]`))
	for _, tt := range []struct{ tiers, want string }{
		{"2-34900", "rooms:price"},
		{"1:34900", "at least 2"},
		{"2:34900, 4:30000", "rooms per guest (3)"},
		{"3:34900, 2:30000", "more than the tier before"},
		{"2:39900", "below the one before it (39900)"},
		{"2:34900, 3:34900", "below the one before it (34900)"},
	} {
		runSteps(t, ctx, setInput("f-price_tiers", tt.tiers), submit, visible("#create-errors"))
		if got := textOf(t, ctx, "#e-price_tiers"); !strings.Contains(got, tt.want) {
			t.Errorf("tiers %q: says %q, want %q", tt.tiers, got, tt.want)
		}
		if got := attrOf(t, ctx, "#f-price_tiers", "aria-invalid"); got != "true" {
			t.Errorf("tiers %q: aria-invalid %q", tt.tiers, got)
		}
		if id := jsString(t, ctx, `document.activeElement.id`); id != "f-price_tiers" {
			t.Errorf("tiers %q: focus on %q, want the tiers field", tt.tiers, id)
		}
	}
	if n := len(c.adminSales(t)); n != before {
		t.Fatalf("%d sales after refused tiers, want %d", n, before)
	}
	runSteps(t, ctx, setInput("f-price_tiers", "2:34900, 3:32900"))
	if got := textOf(t, ctx, "#h-price_tiers"); !strings.Contains(got, "2+ rooms: CN¥349.00") {
		t.Errorf("tiers hint %q", got)
	}
	runSteps(t, ctx, submit, visible("#detail"))
	pollJS(t, ctx, `document.getElementById('d-title').textContent.startsWith('Tiered')`, 5*time.Second)
	id := strings.TrimPrefix(jsString(t, ctx, `location.hash`), "#sale=")
	var got struct {
		PriceTiers []struct {
			Rooms int   `json:"rooms"`
			Price int64 `json:"price"`
		} `json:"price_tiers"`
	}
	if st, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &got); err != nil || st != 200 {
		t.Fatalf("the created sale: %d %v", st, err)
	}
	if fmt.Sprint(got.PriceTiers) != "[{2 34900} {3 32900}]" {
		t.Fatalf("created with tiers %v", got.PriceTiers)
	}
	if !jsBool(t, ctx, `document.documentElement.scrollWidth <= window.innerWidth`) {
		t.Error("the console scrolls sideways at 360 px")
	}
}
