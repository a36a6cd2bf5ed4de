package bench

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"time"
)

// report.html is the page --html writes: one file, its style inline, its
// charts inline SVG (svg.go), no script, and a Content-Security-Policy
// that forbids the browser to fetch anything, so it opens offline and
// shows exactly what was measured.
//
//go:embed report.html
var reportHTML string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"inc": func(i int) int { return i + 1 },
}).Parse(reportHTML))

// htmlPage is what the template renders: a comparison (or none) and one
// section per bench.
type htmlPage struct {
	Title      string
	Generated  string
	Comparison *Comparison
	Notes      []string // the comparison's notes on each figure
	Sections   []htmlSection
	OK         bool
}

type htmlSection struct {
	Name     string // the path's name in a comparison, else empty
	Title    string
	Loop     string // the closed loop, or empty for an open shape
	Report   *Report
	Outcomes []Outcome
	Funnel   template.HTML
	FunnelOf Funnel
	Rounds   []htmlRound
}

type htmlRound struct {
	Result  *Result
	Ceiling *Result
	Check   *Check
	Traffic template.HTML
	Latency template.HTML
	DB      template.HTML
}

// WriteHTML writes the report as one self-contained HTML page.
func (r *Report) WriteHTML(w io.Writer) error {
	p := htmlPage{Title: "flashsale bench: " + r.Shape, Generated: time.Now().UTC().Format(time.RFC3339), OK: r.OK,
		Sections: []htmlSection{section("", "", r)}}
	return reportTemplate.Execute(w, p)
}

// WriteHTML writes the comparison, then each path's report, as one
// self-contained HTML page.
func (c *Comparison) WriteHTML(w io.Writer) error {
	p := htmlPage{Title: "flashsale bench --compare: " + c.Shape, Generated: time.Now().UTC().Format(time.RFC3339),
		Comparison: c, Notes: c.notes(), OK: c.OK}
	for _, path := range c.Paths {
		if path.Report != nil {
			p.Sections = append(p.Sections, section(path.Name, PathTitle(path.Name), path.Report))
		}
	}
	return reportTemplate.Execute(w, p)
}

// Colours of the series, the same in every chart.
const (
	colSent     = "#7f8c8d"
	colAnswered = "#2c3e50"
	colAccepted = "#27ae60"
	colSoldOut  = "#e67e22"
	colLimited  = "#8e44ad"
	colErrors   = "#c0392b"
	colP50      = "#2980b9"
	colP99      = "#c0392b"
	colAllP99   = "#7f8c8d"
)

func section(name, title string, r *Report) htmlSection {
	s := htmlSection{Name: name, Title: title, Loop: r.loop(), Report: r, Outcomes: sumOutcomes(r.Rounds)}
	for _, res := range r.Rounds {
		s.FunnelOf.Admission += res.Funnel.Admission
		s.FunnelOf.Stock += res.Funnel.Stock
		s.FunnelOf.Orders += res.Funnel.Orders
		s.FunnelOf.Paid += res.Funnel.Paid
	}
	f := s.FunnelOf
	s.Funnel = barChart("the purchase funnel, all rounds", []bar{
		{"token and purchase requests", f.Admission + f.Stock + f.Orders, "", colAnswered},
		{"past admission", f.Stock + f.Orders, fmt.Sprintf("  (%d stopped at admission)", f.Admission), colP50},
		{"orders (202)", f.Orders, fmt.Sprintf("  (%d refused by the stock engine)", f.Stock), colAccepted},
		{"paid", f.Paid, "", colSoldOut},
	})
	for i, res := range r.Rounds {
		hr := htmlRound{Result: res}
		if i < len(r.Checks) {
			hr.Check = r.Checks[i]
		}
		if i < len(r.Ceilings) {
			hr.Ceiling = r.Ceilings[i]
		}
		pick := func(f func(Second) float64) []float64 {
			vs := make([]float64, len(res.Series))
			for j, sec := range res.Series {
				vs[j] = f(sec)
			}
			return vs
		}
		hr.Traffic = lineChart(fmt.Sprintf("round %d: requests per second", i+1), "requests per second", []line{
			{name: "sent (due by the schedule)", color: colSent, values: pick(func(s Second) float64 { return float64(s.Sent) }), dashed: true},
			{name: "answered", color: colAnswered, values: pick(func(s Second) float64 { return float64(s.Requests) })},
			{name: "accepted (202)", color: colAccepted, values: pick(func(s Second) float64 { return float64(s.Accepted) })},
			{name: "sold out", color: colSoldOut, values: pick(func(s Second) float64 { return float64(s.SoldOut) })},
			{name: "429 rate limited", color: colLimited, values: pick(func(s Second) float64 { return float64(s.Limited) })},
			{name: "5xx", color: colErrors, values: pick(func(s Second) float64 { return float64(s.Errors) })},
		})
		hr.Latency = lineChart(fmt.Sprintf("round %d: latency per second", i+1), "ms from the scheduled send", []line{
			{name: "purchase p50", color: colP50, values: pick(func(s Second) float64 { return s.Purchase.P50 })},
			{name: "purchase p99", color: colP99, values: pick(func(s Second) float64 { return s.Purchase.P99 })},
			{name: "every request p99", color: colAllP99, values: pick(func(s Second) float64 { return s.P99 }), dashed: true},
		})
		if res.DB != nil {
			hr.DB = lineChart(fmt.Sprintf("round %d: the server's database calls per second", i+1), "per second", []line{
				{name: "database calls", color: colAnswered, values: res.DB.Calls},
				{name: "orders placed", color: colAccepted, values: res.DB.Orders},
			})
		}
		s.Rounds = append(s.Rounds, hr)
	}
	return s
}
