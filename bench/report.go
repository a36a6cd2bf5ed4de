package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is a whole bench: every round against the target, the same
// rounds against the ceiling when there is one, each round's invariant
// check, and the medians and ratios over the rounds. It is what --json
// writes.
type Report struct {
	Target  string `json:"target"`
	Ceiling string `json:"ceiling,omitempty"` // what the ceiling was, when one ran
	Shape   string `json:"shape"`
	Mix     string `json:"mix"`
	// Kind is the sales' kind when it is not a stay ("slot", "seats",
	// --kind).
	Kind string `json:"kind,omitempty"`
	// Notes are what the reader must know of how it was measured that the
	// figures do not say (where the server ran, what was forced).
	Notes  []string  `json:"notes,omitempty"`
	Rounds []*Result `json:"rounds"`
	// Ceilings are the ceiling's rounds, each run just before the round
	// of the same index, so that noise hits both.
	Ceilings []*Result `json:"ceiling_rounds,omitempty"`
	Checks   []*Check  `json:"checks"`
	Median   Summary   `json:"median"`
	// CeilingMedian and Ratio (target / ceiling, per figure) are set when
	// a ceiling ran. A throughput ratio of 0.9 is 90 % of the ceiling's
	// rate; a latency ratio of 1.2 is 20 % slower than it.
	CeilingMedian *Summary `json:"ceiling_median,omitempty"`
	Ratio         *Summary `json:"ratio,omitempty"`
	// RoundRatios are each round's own ratios, to the ceiling's round
	// just before it: how far the figures move from round to round.
	RoundRatios []Summary `json:"round_ratios,omitempty"`
	// PartsRounds are, with --parts, each round's parts of an accepted
	// purchase, each run alone (PartHTTP is the ceiling's round), and the
	// bound they imply; PartsMedian is each figure's median over the
	// rounds (its ratio the median of the rounds' ratios).
	PartsRounds []*PartsRound `json:"parts_rounds,omitempty"`
	PartsMedian *PartsRound   `json:"parts_median,omitempty"`
	OK          bool          `json:"ok"` // every invariant of every round held
}

// Summary is the median over rounds of each figure.
type Summary struct {
	Throughput float64 `json:"throughput"`
	// Sessions and Accepted are a closed loop's sessions and 202s per
	// second. In a ratio, Accepted is the target's 202s to the ceiling's
	// sessions: the ceiling accepts nothing, and its session (the same
	// requests, each answered 409) is what a guest costs at the least.
	Sessions  float64         `json:"sessions_per_s,omitempty"`
	Accepted  float64         `json:"accepted_per_s,omitempty"`
	Endpoints []EndpointStats `json:"endpoints"`
}

// endpoint is the figures of the endpoint called name.
func (s Summary) endpoint(name string) (EndpointStats, bool) {
	i := slices.IndexFunc(s.Endpoints, func(e EndpointStats) bool { return e.Name == name })
	if i < 0 {
		return EndpointStats{}, false
	}
	return s.Endpoints[i], true
}

// Summarize fills in the medians, the ratios and OK from the rounds.
func (r *Report) Summarize() {
	r.Median = summarize(r.Rounds)
	if len(r.Ceilings) > 0 {
		c := summarize(r.Ceilings)
		x := ratio(r.Median, c)
		r.CeilingMedian, r.Ratio, r.RoundRatios = &c, &x, nil
		for i := range min(len(r.Rounds), len(r.Ceilings)) {
			r.RoundRatios = append(r.RoundRatios, ratio(summarize(r.Rounds[i:i+1]), summarize(r.Ceilings[i:i+1])))
		}
	}
	r.summarizeParts()
	r.OK = true
	for _, c := range r.Checks {
		r.OK = r.OK && c.OK()
	}
}

// ratio is the target's figures t over the ceiling's c.
func ratio(t, c Summary) Summary {
	x := Summary{Throughput: div(t.Throughput, c.Throughput), Sessions: div(t.Sessions, c.Sessions), Accepted: div(t.Accepted, c.Sessions)}
	for _, e := range t.Endpoints {
		ce, ok := c.endpoint(e.Name)
		if !ok {
			continue
		}
		x.Endpoints = append(x.Endpoints, EndpointStats{Name: e.Name, Count: e.Count, Mean: div(e.Mean, ce.Mean),
			P50: div(e.P50, ce.P50), P90: div(e.P90, ce.P90), P99: div(e.P99, ce.P99), P999: div(e.P999, ce.P999), Max: div(e.Max, ce.Max)})
	}
	return x
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func summarize(rs []*Result) Summary {
	var s Summary
	if len(rs) == 0 {
		return s
	}
	s.Throughput = median(rs, func(r *Result) float64 { return r.Throughput })
	s.Sessions = median(rs, func(r *Result) float64 { return r.SessionRate })
	s.Accepted = median(rs, func(r *Result) float64 { return r.AcceptedRate })
	for _, name := range endpointNames {
		var es []EndpointStats
		for _, r := range rs {
			if i := slices.IndexFunc(r.Endpoints, func(e EndpointStats) bool { return e.Name == name }); i >= 0 {
				es = append(es, r.Endpoints[i])
			}
		}
		if len(es) == 0 {
			continue
		}
		m := func(f func(EndpointStats) float64) float64 { return median(es, f) }
		s.Endpoints = append(s.Endpoints, EndpointStats{Name: name,
			Count: int64(m(func(e EndpointStats) float64 { return float64(e.Count) })),
			Mean:  m(func(e EndpointStats) float64 { return e.Mean }),
			P50:   m(func(e EndpointStats) float64 { return e.P50 }), P90: m(func(e EndpointStats) float64 { return e.P90 }),
			P99: m(func(e EndpointStats) float64 { return e.P99 }), P999: m(func(e EndpointStats) float64 { return e.P999 }),
			Max: m(func(e EndpointStats) float64 { return e.Max })})
	}
	return s
}

// median is the middle value (the mean of the two middle ones for an even count).
func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	n := len(vs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	what := r.Shape
	if r.Mix != "" {
		what += ", mix " + r.Mix
	}
	if r.Kind != "" {
		what += ", " + r.Kind + " sales"
	}
	fmt.Fprintf(&b, "flashsale bench: %s, %d round(s), target %s\n", what, len(r.Rounds), r.Target)
	if r.Ceiling != "" {
		fmt.Fprintf(&b, "ceiling: %s, its round run just before each of the target's\n", r.Ceiling)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	var sessions, requests int
	var lag float64
	for _, res := range r.Rounds {
		sessions += res.Sessions
		requests += res.Requests
		lag = max(lag, res.LagMS)
	}
	fmt.Fprintf(&b, "\n%d sessions, %d requests; throughput %.0f req/s (median of rounds)", sessions, requests, r.Median.Throughput)
	if r.CeilingMedian != nil {
		fmt.Fprintf(&b, ", ceiling %.0f req/s: %.2f× the ceiling", r.CeilingMedian.Throughput, r.Ratio.Throughput)
	}
	loop := r.loop()
	if loop == LoopAccepted {
		fmt.Fprintf(&b, "\naccepted purchases %.0f/s (median of rounds)", r.Median.Accepted)
		if r.CeilingMedian != nil {
			fmt.Fprintf(&b, ", the ceiling's guests (token + purchase) %.0f/s: %.2f× the ceiling", r.CeilingMedian.Sessions, r.Ratio.Accepted)
		}
		if m := r.PartsMedian; m != nil {
			fmt.Fprintf(&b, "; %.2f× the bound its parts imply, %.0f/s (medians of rounds' figures)", m.Ratio, m.Bound)
		}
	}
	from := "scheduled send"
	if loop != "" {
		from = "send"
		fmt.Fprintf(&b, "\nclosed loop: %d workers, each sending its next request when its last was answered\n", r.Rounds[0].Conns)
	} else {
		fmt.Fprintf(&b, "\ngenerator at most %.0f ms behind its schedule (that wait is in the latencies)\n", lag)
	}
	r.writeRoundRatios(&b, loop)
	r.writeParts(&b)
	writeDBLoad(&b, r.Rounds)

	fmt.Fprintf(&b, "\nlatency, ms from each request's %s (median of rounds)\n", from)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "endpoint\trequests\tmean\tp50\tp90\tp99\tp99.9\tmax\t"
	if r.Ratio != nil {
		head += "p50 ×ceil\tp99 ×ceil\tp99.9 ×ceil\t"
	}
	fmt.Fprintln(tw, head)
	for _, e := range r.Median.Endpoints {
		line := fmt.Sprintf("%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t", e.Name, e.Count, e.Mean, e.P50, e.P90, e.P99, e.P999, e.Max)
		if r.Ratio != nil {
			if x, ok := r.Ratio.endpoint(e.Name); ok {
				line += fmt.Sprintf("%.2f\t%.2f\t%.2f\t", x.P50, x.P99, x.P999)
			} else {
				line += "-\t-\t-\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()

	b.WriteString("\noutcomes (all rounds)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, o := range sumOutcomes(r.Rounds) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", o.Endpoint, o.StatusText(), o.Code, o.Count)
	}
	tw.Flush()

	var f Funnel
	for _, res := range r.Rounds {
		f.Admission += res.Funnel.Admission
		f.Stock += res.Funnel.Stock
		f.Orders += res.Funnel.Orders
		f.Paid += res.Funnel.Paid
	}
	fmt.Fprintf(&b, "\nfunnel (all rounds): %d stopped at admission (token or purchase refused: bad input, auth, token, rate limit, overload)"+
		"\n  → %d refused by the stock engine (sold out, over the user's limit) → %d orders → %d paid\n", f.Admission, f.Stock, f.Orders, f.Paid)

	b.WriteString("\ninvariants, checked after draining: the server's audit against the client's record of every 202\n")
	for i, c := range r.Checks {
		fmt.Fprintf(&b, "round %d: stock %d, held %d, sold %d; the 202s' orders by status: %s\n", i+1, c.Stock, c.Held, c.Sold, statusCounts(c.Orders))
		for _, inv := range c.Invariants {
			if inv.OK {
				fmt.Fprintf(&b, "  ok      %s\n", inv.Name)
			} else {
				fmt.Fprintf(&b, "  BROKEN  %s: %s\n", inv.Name, inv.Detail)
			}
		}
	}
	return writeVerdict(w, &b, r.OK, "every invariant held")
}

// loop is the closed loop the rounds ran ("" for an open shape).
func (r *Report) loop() string {
	if len(r.Rounds) == 0 {
		return ""
	}
	return r.Rounds[0].Loop
}

// writeRoundRatios writes each round's ratios to its ceiling's round.
func (r *Report) writeRoundRatios(b *strings.Builder, loop string) {
	if len(r.RoundRatios) == 0 {
		return
	}
	b.WriteString("\nround by round, as ratios to the ceiling's round just before it\n")
	for i, x := range r.RoundRatios {
		t, c := r.Rounds[i], r.Ceilings[i]
		fmt.Fprintf(b, "  round %d: throughput %.2f× (%.0f / %.0f req/s)", i+1, x.Throughput, t.Throughput, c.Throughput)
		if loop == LoopAccepted {
			fmt.Fprintf(b, ", accepted %.2f× (%.0f/s / %.0f guests/s)", x.Accepted, t.AcceptedRate, c.SessionRate)
		}
		if e, ok := x.endpoint(epPurchase.String()); ok {
			fmt.Fprintf(b, "; purchase p50 %.2f×, p99 %.2f×", e.P50, e.P99)
		}
		b.WriteString("\n")
	}
}

// writeVerdict ends a text report with whether every invariant held
// (saying so as held does) and writes it to w.
func writeVerdict(w io.Writer, b *strings.Builder, ok bool, held string) error {
	if ok {
		fmt.Fprintf(b, "\n%s\n", held)
	} else {
		b.WriteString("\nINVARIANT BROKEN\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func statusCounts(m map[string]int) string {
	var parts []string
	for _, s := range []string{"pending", "held", "paid", "expired", "cancelled", "failed", "unreadable"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sumOutcomes(rs []*Result) []Outcome {
	var out []Outcome
	for _, r := range rs {
		for _, o := range r.Outcomes {
			i := slices.IndexFunc(out, func(x Outcome) bool { return x.Endpoint == o.Endpoint && x.Status == o.Status && x.Code == o.Code })
			if i < 0 {
				out = append(out, o)
				continue
			}
			out[i].Count += o.Count
		}
	}
	slices.SortStableFunc(out, func(a, b Outcome) int {
		return slices.Index(endpointNames[:], a.Endpoint) - slices.Index(endpointNames[:], b.Endpoint)
	})
	return out
}

// writeDBLoad says what the server's database did: each round's peak and
// mean calls per second, or why they are unknown.
func writeDBLoad(b *strings.Builder, rounds []*Result) {
	for i, res := range rounds {
		switch {
		case res.DB != nil:
			fmt.Fprintf(b, "round %d: the server's database calls peak %.0f/s, mean %.0f/s; orders placed peak %.0f/s, mean %.0f/s "+
				"(its %s, watched %.1f s: the busiest one-second window, and the mean)\n",
				i+1, res.DB.PeakCalls, res.DB.MeanCalls, res.DB.PeakOrders, res.DB.MeanOrders, dbCallsFamily, res.DB.Seconds)
		case res.DBMissing != "":
			fmt.Fprintf(b, "round %d: the server's database load is unknown: %s\n", i+1, res.DBMissing)
		}
	}
}
