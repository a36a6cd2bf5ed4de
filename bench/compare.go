package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The paths a flashsale server sells by, as --compare names them. The
// source's table has three columns: a synchronous database write, an
// optimistic lock (a conditional UPDATE per purchase), Redis + a queue.
// The distributed shape is its third; db mode (the breaker forced open,
// every purchase the database's conditional update) its second. Nothing
// here is its first, a bare UPDATE without a condition: the embedded
// shape sells from an in-process engine and a group commit, and is in the
// table as what a single process does.
const (
	PathEmbedded    = "embedded"
	PathDistributed = "distributed"
	PathDBMode      = "dbmode"
)

// Paths are the paths in the table's order.
var Paths = []string{PathEmbedded, PathDistributed, PathDBMode}

// PathTitle is the heading of a path's column.
func PathTitle(name string) string {
	switch name {
	case PathEmbedded:
		return "SQLite, the in-process stock engine and group commit"
	case PathDBMode:
		return "the distributed shape with its breaker forced open (db mode): every purchase the database's conditional update, the source's optimistic lock"
	case PathDistributed:
		return "Redis + RabbitMQ + the database, the source's Redis + queue"
	}
	return name
}

// Comparison is the same shape run against each path: what --compare
// prints as one table, and writes with --json and --html.
type Comparison struct {
	Shape string `json:"shape"`
	// Mix is the guests' mix of an open-loop shape; a closed loop
	// (Closed) has none.
	Mix    string          `json:"mix,omitempty"`
	Closed bool            `json:"closed,omitempty"`
	Paths  []*PathResult   `json:"paths"`
	Rows   []ComparisonRow `json:"rows"`
	OK     bool            `json:"ok"` // every path that ran kept every invariant
}

// PathResult is one path's bench, or why it did not run.
type PathResult struct {
	Name    string  `json:"name"`
	Title   string  `json:"title"`
	Target  string  `json:"target,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
	Report  *Report `json:"report,omitempty"`
}

// ComparisonRow is one figure of the table, a cell per path ("n/a" and
// its reason in Notes when it could not be measured, "skipped" for a path
// that did not run).
type ComparisonRow struct {
	Figure string   `json:"figure"`
	Cells  []string `json:"cells"`
	// Values are the cells as numbers, for machines (nil where a cell is
	// not a number).
	Values []*float64 `json:"values"`
	Notes  []string   `json:"notes,omitempty"`
}

// The figures of the table, after the source's: latency, the database's
// peak load, oversold orders, the completion rate; then what explains
// them.
const (
	FigMean       = "purchase latency, mean"
	FigMax        = "purchase latency, max"
	FigP99        = "purchase latency, p99"
	FigThroughput = "throughput (requests/s)"
	FigDBPeak     = "database peak QPS"
	FigDBMean     = "database mean QPS"
	FigOrdersPeak = "orders written/s, peak"
	FigOversold   = "oversold orders"
	FigCompletion = "completion rate"
	FigErrors     = "purchases failed (5xx, no answer)"
	FigInvariants = "invariants"
)

// Summarize fills in the rows and OK from the paths' reports.
func (c *Comparison) Summarize() {
	c.OK = true
	c.Rows = nil
	figs := []string{FigMean, FigMax, FigP99, FigThroughput, FigDBPeak, FigDBMean, FigOrdersPeak, FigOversold, FigCompletion, FigErrors, FigInvariants}
	for _, fig := range figs {
		row := ComparisonRow{Figure: fig}
		for _, p := range c.Paths {
			if p.Report == nil {
				row.Cells, row.Values = append(row.Cells, "skipped"), append(row.Values, nil)
				continue
			}
			text, v, note := cell(fig, p.Report)
			row.Cells, row.Values = append(row.Cells, text), append(row.Values, v)
			if note != "" {
				row.Notes = append(row.Notes, p.Name+": "+note)
			}
		}
		c.Rows = append(c.Rows, row)
	}
	for _, p := range c.Paths {
		if p.Report != nil {
			c.OK = c.OK && p.Report.OK
		}
	}
}

// cell is one figure of one path's report: its text, its value when it
// is a number, and, for "n/a", why.
func cell(fig string, r *Report) (string, *float64, string) {
	num := func(v float64, format string) (string, *float64, string) { return fmt.Sprintf(format, v), &v, "" }
	purchase := func() (EndpointStats, bool) {
		i := slices.IndexFunc(r.Median.Endpoints, func(e EndpointStats) bool { return e.Name == epPurchase.String() })
		if i < 0 {
			return EndpointStats{}, false
		}
		return r.Median.Endpoints[i], true
	}
	switch fig {
	case FigMean, FigMax, FigP99:
		e, ok := purchase()
		if !ok {
			return "n/a", nil, "no purchase was answered"
		}
		v := map[string]float64{FigMean: e.Mean, FigMax: e.Max, FigP99: e.P99}[fig]
		return num(v, "%.1f ms")
	case FigThroughput:
		return num(r.Median.Throughput, "%.0f")
	case FigDBPeak, FigDBMean, FigOrdersPeak:
		var vs []float64
		for _, res := range r.Rounds {
			if res.DB == nil {
				return "n/a", nil, "the server's metrics could not be read (" + res.DBMissing + ")"
			}
			vs = append(vs, map[string]float64{FigDBPeak: res.DB.PeakCalls, FigDBMean: res.DB.MeanCalls, FigOrdersPeak: res.DB.PeakOrders}[fig])
		}
		if len(vs) == 0 {
			return "n/a", nil, "no round ran"
		}
		return num(median(vs, func(v float64) float64 { return v }), "%.0f")
	case FigOversold:
		n := 0
		for _, ck := range r.Checks {
			n += ck.Oversold
		}
		return num(float64(n), "%.0f")
	case FigCompletion:
		var accepted, written int
		for _, ck := range r.Checks {
			for status, n := range ck.Orders {
				accepted += n
				switch status {
				case "held", "paid", "expired", "cancelled":
					written += n
				}
			}
		}
		if accepted == 0 {
			return "n/a", nil, "no purchase was answered 202"
		}
		v := 100 * float64(written) / float64(accepted)
		return fmt.Sprintf("%.1f%% (%d/%d)", v, written, accepted), &v, ""
	case FigErrors:
		var all, failed int
		for _, res := range r.Rounds {
			for _, o := range res.Outcomes {
				if o.Endpoint != epPurchase.String() {
					continue
				}
				all += o.Count
				if o.Status >= 500 || o.Code == "transport" {
					failed += o.Count
				}
			}
		}
		if all == 0 {
			return "n/a", nil, "no purchase was sent"
		}
		v := 100 * float64(failed) / float64(all)
		return fmt.Sprintf("%.1f%% (%d/%d)", v, failed, all), &v, ""
	case FigInvariants:
		if r.OK {
			return "all held", nil, ""
		}
		var broken []string
		for _, ck := range r.Checks {
			for _, b := range ck.Broken() {
				if !slices.Contains(broken, b) {
					broken = append(broken, b)
				}
			}
		}
		return "BROKEN: " + strings.Join(broken, ", "), nil, ""
	}
	return "n/a", nil, "unknown figure"
}

// comparisonNotes say how each figure was measured.
var comparisonNotes = []string{
	"database QPS: calls from the server to its database per second, from its own counter flashsale_db_calls_total on /metrics, read every 250 ms from the first arrival until no order had been placed for a second after the load (the queued path writes after its 202s); peak: the busiest one-second window, mean: over that whole watch; a batch of orders is one call, so the database's own statement count is higher on the batching paths",
	"orders written/s: reservations the database's conditional insert was asked to place per second (flashsale_db_orders_placed_total)",
	"oversold orders: rooms taken beyond the stock after draining, by the server's audit or by the client's own record of every 202 (the larger)",
	"completion rate: the 202s whose order its owner reads back as written (held, paid, expired or cancelled) after draining, over every 202",
	"purchases failed: purchase requests answered 5xx (503 overloaded or switching included) or with no answer at all, over every purchase request",
}

// notes are comparisonNotes after the latency's, which depends on the
// shape: from the scheduled send in an open loop, from the send in a
// closed one.
func (c *Comparison) notes() []string {
	latency := "latency: the purchase endpoint's, in ms from each request's scheduled send (open loop), the median over rounds of each round's figure"
	if c.Closed {
		latency = "latency: the purchase endpoint's, in ms from each request's send (closed loop: a worker sends when its last answer came), the median over rounds of each round's figure"
	}
	return append([]string{latency}, comparisonNotes...)
}

// WriteText writes the table the source prints, a column per path, and
// under it how each figure was measured and why a cell is n/a.
func (c *Comparison) WriteText(w io.Writer) error {
	var b strings.Builder
	if c.Closed {
		fmt.Fprintf(&b, "flashsale bench --compare: %s (closed loop)\n\n", c.Shape)
	} else {
		fmt.Fprintf(&b, "flashsale bench --compare: %s, mix %s\n\n", c.Shape, c.Mix)
	}
	for _, p := range c.Paths {
		switch {
		case p.Skipped != "":
			fmt.Fprintf(&b, "%-12s %s: skipped: %s\n", p.Name, PathTitle(p.Name), p.Skipped)
		default:
			fmt.Fprintf(&b, "%-12s %s, at %s\n", p.Name, PathTitle(p.Name), p.Target)
		}
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := "figure\t"
	for _, p := range c.Paths {
		head += p.Name + "\t"
	}
	fmt.Fprintln(tw, head)
	var notes []string
	for _, row := range c.Rows {
		line := row.Figure + "\t"
		for _, cl := range row.Cells {
			line += cl + "\t"
		}
		fmt.Fprintln(tw, line)
		for _, n := range row.Notes {
			notes = append(notes, row.Figure+", "+n)
		}
	}
	tw.Flush()
	b.WriteString("\n")
	for _, n := range c.notes() {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "  n/a: %s\n", n)
	}
	return writeVerdict(w, &b, c.OK, "every invariant held on every path that ran")
}
