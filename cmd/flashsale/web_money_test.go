package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/internal/app"
)

// TestBrowserMoney: amounts are ISO 4217 minor units in the currency's own
// exponent. Before, the pages divided every currency by 100: a JPY sale of
// 9900 (yen have no minor unit) showed ¥99, and a KWD sale of 12345 fils
// (three decimals) KWD 123.45. The hold line after buying says the same
// amount the API charged.
func TestBrowserMoney(t *testing.T) {
	ctx := mustBrowser(t)
	m, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	for _, tt := range []struct {
		currency        string
		price, original int
		want, notWant   []string
	}{
		{"JPY", 9900, 15000, []string{"¥9,900", "¥15,000"}, []string{"¥99.00", "¥99 "}},
		{"KWD", 12345, 20000, []string{"KWD 12.345", "KWD 20.000"}, []string{"123.45"}},
		{"CNY", 39900, 69900, []string{"CN¥399.00", "CN¥699.00"}, nil},
	} {
		t.Run(tt.currency, func(t *testing.T) {
			sale := saleJSON([]int{5}, 1, false)
			sale["currency"], sale["price"], sale["original_price"] = tt.currency, tt.price, tt.original
			id := c.createSale(t, sale)
			runSteps(t, ctx, chromedp.Navigate("http://"+m.Addr()+"/sales/"+id), visible(`#state[data-state="ready"]`))
			got := textOf(t, ctx, "#price") + " | " + textOf(t, ctx, "#original") + " | " + textOf(t, ctx, "#amount")
			for _, w := range tt.want {
				if !strings.Contains(strings.ReplaceAll(got, "\u00a0", " "), w) {
					t.Errorf("price, original, amount %q: no %q", got, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(strings.ReplaceAll(got, "\u00a0", " ")+" ", w) {
					t.Errorf("price, original, amount %q: %q, a hundredth (or a hundred times) of the price", got, w)
				}
			}
			runSteps(t, ctx, chromedp.Click(chromedp.CSS("#buy")), visible(`#state[data-state="held"]`))
			if hold := strings.ReplaceAll(textOf(t, ctx, "#hold"), "\u00a0", " "); !strings.Contains(hold, tt.want[0]) {
				t.Errorf("hold line %q, want %q", hold, tt.want[0])
			}
		})
	}
}
