package bench

import (
	"math"
	"strings"
	"testing"
)

// TestSummarizeParts: each round's bound is 1/Σ 1/rate of its parts, its
// ratio the round's accepted rate over it, and the median row each
// column's own median; a part's failed calls are said in the text.
func TestSummarizeParts(t *testing.T) {
	parts := func(http, reserve, publish float64) *PartsRound {
		return &PartsRound{Parts: []*PartResult{{Name: PartHTTP, Rate: http}, {Name: "reserve", Rate: reserve}, {Name: "publish", Rate: publish}}}
	}
	rep := &Report{
		Rounds:      []*Result{{Loop: LoopAccepted, AcceptedRate: 1000}, {Loop: LoopAccepted, AcceptedRate: 500}, {Loop: LoopAccepted, AcceptedRate: 900}},
		PartsRounds: []*PartsRound{parts(6000, 6000, 6000), parts(4000, 8000, 8000), parts(3000, 12000, 4000)},
	}
	rep.PartsRounds[1].Parts[2].Errors, rep.PartsRounds[1].Parts[2].Calls, rep.PartsRounds[1].Parts[2].FirstError = 3, 97, "no confirm in time"
	rep.Summarize()
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for i, want := range []struct{ bound, ratio float64 }{{2000, 0.5}, {2000, 0.25}, {1500, 0.6}} {
		if p := rep.PartsRounds[i]; !near(p.Bound, want.bound) || !near(p.Ratio, want.ratio) {
			t.Errorf("round %d: bound %.1f, ratio %.3f; want %.0f and %.2f", i+1, p.Bound, p.Ratio, want.bound, want.ratio)
		}
	}
	m := rep.PartsMedian
	if !near(m.Bound, 2000) || !near(m.Accepted, 900) || !near(m.Ratio, 0.5) || !near(m.Parts[0].Rate, 4000) || !near(m.Parts[1].Rate, 8000) || !near(m.Parts[2].Rate, 6000) {
		t.Errorf("median %+v (parts %v %v %v)", m, *m.Parts[0], *m.Parts[1], *m.Parts[2])
	}
	var b strings.Builder
	rep.writeParts(&b)
	for _, want := range []string{"bound = 1/(1/http + 1/reserve + 1/publish)", "http/s  reserve/s  publish/s  bound/s  accepted/s  ×bound",
		"median    4000       8000       6000     2000         900    0.50", "round 2: publish: 3 of 100 calls failed (left out of its rate), the first: no confirm in time"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("parts text lacks %q:\n%s", want, b.String())
		}
	}
}
