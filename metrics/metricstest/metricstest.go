// Package metricstest reads metrics back in tests: from a registry or
// from a /metrics endpoint, as Prometheus would scrape it.
package metricstest

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are gathered metric families by name.
type Families map[string]*dto.MetricFamily

// Gather reads g.
func Gather(tb testing.TB, g prometheus.Gatherer) Families {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	f := Families{}
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	return f
}

// Scrape reads url's text exposition.
func Scrape(tb testing.TB, url string) Families {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatalf("parse %s: %v", url, err)
	}
	return Families(mfs)
}

// Value is the counter or gauge name whose labels include every
// name/value pair given (as "sale", id, "outcome", "ok"), summed over
// the series that match; 0 when none does.
func (f Families) Value(name string, pairs ...string) float64 {
	mf := f[name]
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if !matches(m, pairs) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func matches(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
