package web

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
)

// TestStayRuleCodes: the sale page tells a stay refused by a night's rule
// (issue 25) from any other refusal by the rule's error code, from one
// list in sale.js; it must be the codes the server sends, no more, no
// fewer, or a refusal would read as "try again".
func TestStayRuleCodes(t *testing.T) {
	b, err := os.ReadFile("static/sale.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const STAY_RULES = \[([^\]]*)\];`).FindSubmatch(b)
	if m == nil {
		t.Fatal("sale.js: no STAY_RULES list")
	}
	var got []string
	for _, s := range strings.Split(string(m[1]), ",") {
		got = append(got, strings.Trim(strings.TrimSpace(s), "'"))
	}
	want := []string{flashsale.EMinStay, flashsale.EMaxStay, flashsale.EClosedToArrival, flashsale.EClosedToDeparture, flashsale.EStopSell}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sale.js STAY_RULES %q, want the server's codes %q", got, want)
	}
}
