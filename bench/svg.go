package bench

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// The report's charts are SVG written here, inline in the page: no
// script, no library, nothing fetched, so the file opens anywhere and
// prints as it shows.

// line is one series of a line chart, a value per second.
type line struct {
	name, color string
	values      []float64
	dashed      bool
}

// Chart geometry, in the viewBox's units (the SVG scales to the page).
const (
	chartW, chartH                       = 760, 260
	padLeft, padRight, padTop, padBottom = 64, 16, 12, 44
)

// lineChart draws lines over the seconds of a run: one point per second
// per line, a y axis from 0 to a round number above the largest value,
// ticks and labels on both axes, and a legend. Each line is a <path
// class="series" data-series=NAME data-points=N>.
func lineChart(title, yLabel string, lines []line) template.HTML {
	n, top := 0, 0.0
	for _, l := range lines {
		n = max(n, len(l.values))
		for _, v := range l.values {
			top = max(top, v)
		}
	}
	top = niceCeil(top)
	plotW, plotH := float64(chartW-padLeft-padRight), float64(chartH-padTop-padBottom)
	x := func(i int) float64 {
		if n <= 1 {
			return padLeft + plotW/2
		}
		return padLeft + plotW*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return padTop + plotH*(1-v/top) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		chartW, chartH, html.EscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	// The y axis: five ticks, gridlines, the unit.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padLeft, chartW-padRight, y(v), y(v))
		fmt.Fprintf(&b, `<text class="tick y-tick" x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`,
			padLeft-6, y(v), tickText(v))
	}
	fmt.Fprintf(&b, `<text class="axis-label y-label" transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`,
		padTop+plotH/2, html.EscapeString(yLabel))
	// The x axis: seconds since the first arrival, at most about ten ticks.
	step := niceStep(n)
	for i := 0; i < n; i += step {
		fmt.Fprintf(&b, `<line class="tick-mark" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x(i), x(i), padTop+plotH, padTop+plotH+4)
		fmt.Fprintf(&b, `<text class="tick x-tick" x="%.1f" y="%.1f" text-anchor="middle">%d</text>`, x(i), padTop+plotH+16, i)
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padLeft, chartW-padRight, padTop+plotH, padTop+plotH)
	fmt.Fprintf(&b, `<text class="axis-label x-label" x="%.1f" y="%d" text-anchor="middle">seconds since the first arrival</text>`,
		padLeft+plotW/2, chartH-6)
	for _, l := range lines {
		if len(l.values) == 0 {
			continue
		}
		var d strings.Builder
		for i, v := range l.values {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, x(i), y(v))
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<path class="series" data-series="%s" data-points="%d" fill="none" stroke="%s" stroke-width="2"%s d="%s"><title>%s</title></path>`,
			html.EscapeString(l.name), len(l.values), l.color, dash, strings.TrimSpace(d.String()), html.EscapeString(l.name))
		if len(l.values) == 1 { // a lone point draws no line
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(0), y(l.values[0]), l.color)
		}
	}
	b.WriteString(`</svg>`)
	b.WriteString(`<ul class="legend">`)
	for _, l := range lines {
		style := "solid"
		if l.dashed {
			style = "dashed"
		}
		fmt.Fprintf(&b, `<li><span class="swatch %s" style="border-color:%s"></span>%s</li>`, style, l.color, html.EscapeString(l.name))
	}
	b.WriteString(`</ul>`)
	return template.HTML(b.String())
}

// bar is one bar of a bar chart.
type bar struct {
	label string
	value int
	note  string
	color string
}

// barChart draws horizontal bars scaled to the largest, each labelled
// with its value: the funnel. Each bar is a <rect class="bar" data-value=N>.
func barChart(title string, bars []bar) template.HTML {
	const rowH, labelW, valueW = 34, 220, 300 // valueW: room for the value and its note
	top := 0
	for _, br := range bars {
		top = max(top, br.value)
	}
	h := rowH*len(bars) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart funnel" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`,
		chartW, h, html.EscapeString(title), html.EscapeString(title))
	plotW := float64(chartW - labelW - valueW)
	for i, br := range bars {
		w := 0.0
		if top > 0 {
			w = plotW * float64(br.value) / float64(top)
		}
		yy := 4 + i*rowH
		fmt.Fprintf(&b, `<text class="bar-label" x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>`,
			labelW-8, yy+rowH/2-2, html.EscapeString(br.label))
		fmt.Fprintf(&b, `<rect class="bar" data-value="%d" x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %d</title></rect>`,
			br.value, labelW, yy+2, w, rowH-10, br.color, html.EscapeString(br.label), br.value)
		fmt.Fprintf(&b, `<text class="bar-value" x="%.1f" y="%d" dominant-baseline="middle">%d%s</text>`,
			float64(labelW)+w+6, yy+rowH/2-2, br.value, html.EscapeString(br.note))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil is the smallest of 1, 2, 4, 6, 8 times a power of ten at or
// above v (1 for 0): a quarter of each is a short number.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 4, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// niceStep is the seconds between x ticks: 1, 2, 5, 10, 15, 30, 60, ...
// so that n seconds have at most about ten.
func niceStep(n int) int {
	for _, s := range []int{1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if n/s <= 10 {
			return s
		}
	}
	return max(1, n/10)
}

// tickText prints a tick's value without needless decimals.
func tickText(v float64) string {
	switch {
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v*10 == math.Trunc(v*10):
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
