package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// A Part is one call of something every accepted purchase pays for, made
// alone for guest i (a new guest each call), so that the accepted loop's
// rate can be quoted against what its parts allow. The caller supplies it
// (cmd/flashsale's reserve on Redis and publish to RabbitMQ): this package
// needs neither client.
type Part func(ctx context.Context, i int) error

// PartHTTP names the HTTP part: the ceiling's guests (a token and a
// purchase each) per second, taken from the ceiling's round.
const PartHTTP = "http"

// PartResult is one part's run in a round: the calls that succeeded per
// second, and the first of those that failed.
type PartResult struct {
	Name       string  `json:"name"`
	Calls      int     `json:"calls"`
	Errors     int     `json:"errors,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	Rate       float64 `json:"per_s"`
}

// PartsRound is one round's parts (PartHTTP first) and the bound they
// imply, beside the target's accepted purchases of the same round.
type PartsRound struct {
	Parts    []*PartResult `json:"parts"`
	Bound    float64       `json:"bound_per_s"`
	Accepted float64       `json:"accepted_per_s"`
	Ratio    float64       `json:"ratio"` // Accepted / Bound
}

// RunPart has l's workers call part back to back for l's duration, as the
// loop's workers send their guests, and counts what succeeded.
func RunPart(ctx context.Context, l Loop, name string, part Part) *PartResult {
	var (
		next  atomic.Int64
		ok    atomic.Int64
		mu    sync.Mutex
		res   = &PartResult{Name: name}
		wg    sync.WaitGroup
		start = time.Now()
	)
	end := start.Add(l.Duration)
	for range l.Conns {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				if err := part(ctx, int(next.Add(1)-1)); err != nil {
					mu.Lock()
					if res.Errors++; res.FirstError == "" {
						res.FirstError = err.Error()
					}
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	res.Calls, res.Seconds = int(ok.Load()), time.Since(start).Seconds()
	res.Rate = div(float64(res.Calls), res.Seconds)
	return res
}

// CeilingPart is the HTTP part of a round: the ceiling's guests per second.
func CeilingPart(ceiling *Result) *PartResult {
	return &PartResult{Name: PartHTTP, Calls: ceiling.Sessions, Seconds: ceiling.Seconds, Rate: ceiling.SessionRate}
}

// bound is the most accepted purchases per second the parts allow
// together, 1 / (1/a + 1/b + …). On one machine the parts share the CPU:
// each alone takes the whole machine at its rate, so it costs 1/rate of
// the machine's second per purchase, and a purchase that pays for every
// part costs their sum (everything else it does counted as free). A part
// that did nothing makes it 0.
func bound(parts []*PartResult) float64 {
	var cost float64
	for _, p := range parts {
		if p.Rate <= 0 {
			return 0
		}
		cost += 1 / p.Rate
	}
	return div(1, cost)
}

// summarizeParts fills in each parts round's bound, the target's accepted
// rate of that round and their ratio, and the median of each figure.
func (r *Report) summarizeParts() {
	r.PartsMedian = nil
	if len(r.PartsRounds) == 0 {
		return
	}
	for i, p := range r.PartsRounds {
		p.Bound = bound(p.Parts)
		if i < len(r.Rounds) {
			p.Accepted = r.Rounds[i].AcceptedRate
		}
		p.Ratio = div(p.Accepted, p.Bound)
	}
	rs := r.PartsRounds
	m := &PartsRound{
		Bound:    median(rs, func(p *PartsRound) float64 { return p.Bound }),
		Accepted: median(rs, func(p *PartsRound) float64 { return p.Accepted }),
		Ratio:    median(rs, func(p *PartsRound) float64 { return p.Ratio }),
	}
	for j, part := range rs[0].Parts {
		m.Parts = append(m.Parts, &PartResult{Name: part.Name, Rate: median(rs, func(p *PartsRound) float64 {
			if j < len(p.Parts) {
				return p.Parts[j].Rate
			}
			return 0
		})})
	}
	r.PartsMedian = m
}

// writeParts writes the parts round by round and their medians, with the
// bound and the target's accepted rate as a ratio to it.
func (r *Report) writeParts(b *strings.Builder) {
	m := r.PartsMedian
	if m == nil {
		return
	}
	var names, inverses []string
	for _, p := range m.Parts {
		names = append(names, p.Name)
		inverses = append(inverses, "1/"+p.Name)
	}
	fmt.Fprintf(b, "\nparts of an accepted purchase, each alone in its round, as long and with as many workers as the target's loop"+
		" (%s: the ceiling's guests, a token and a purchase each)\n"+
		"bound = 1/(%s): on one machine the parts share the CPU, so their costs per purchase add\n",
		PartHTTP, strings.Join(inverses, " + "))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "round\t%s/s\tbound/s\taccepted/s\t×bound\t\n", strings.Join(names, "/s\t"))
	row := func(label string, p *PartsRound) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, x := range p.Parts {
			fmt.Fprintf(tw, "%.0f\t", x.Rate)
		}
		fmt.Fprintf(tw, "%.0f\t%.0f\t%.2f\t\n", p.Bound, p.Accepted, p.Ratio)
	}
	for i, p := range r.PartsRounds {
		row(fmt.Sprint(i+1), p)
	}
	row("median", m)
	tw.Flush()
	for i, p := range r.PartsRounds {
		for _, x := range p.Parts {
			if x.Errors > 0 {
				fmt.Fprintf(b, "  round %d: %s: %d of %d calls failed (left out of its rate), the first: %s\n",
					i+1, x.Name, x.Errors, x.Errors+x.Calls, x.FirstError)
			}
		}
	}
}
