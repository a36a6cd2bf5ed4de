package bench

import (
	"strings"
	"testing"
)

// TestComparisonHeader: the table says how its latency was measured. An
// open loop's runs from each request's scheduled send, with the guests'
// mix; a closed loop has no mix and no schedule.
func TestComparisonHeader(t *testing.T) {
	for _, tt := range []struct {
		c         Comparison
		want, not []string
	}{
		{Comparison{Shape: "burst", Mix: "normal=70,scalper=20,broken=10"},
			[]string{"burst, mix normal=70,scalper=20,broken=10", "scheduled send (open loop)"}, []string{"closed loop"}},
		{Comparison{Shape: "soldout", Closed: true},
			[]string{"soldout (closed loop)", "each request's send (closed loop"}, []string{"mix", "scheduled"}},
	} {
		var b strings.Builder
		if err := tt.c.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", tt.c.Shape, w, b.String())
			}
		}
		for _, n := range tt.not {
			if strings.Contains(b.String(), n) {
				t.Errorf("%s: %q in\n%s", tt.c.Shape, n, b.String())
			}
		}
	}
}
