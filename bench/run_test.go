package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestOpenLoop: against a server slower than the schedule, with one
// session at a time, the latency of a late session runs from when it was
// due, not from when the generator got round to it: no coordinated
// omission. Fifty sessions due over one second, each three requests of
// 20 ms, take three seconds; the last is due at 1 s and sent near 2.9 s.
func TestOpenLoop(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		CeilingHandler().ServeHTTP(w, r)
	}))
	defer slow.Close()
	c := NewClient(slow.URL, "", "s", 4)
	defer c.CloseIdle()
	res, err := Run(t.Context(), Config{Client: c, SaleID: "x", Shape: Constant(50, time.Second), Mix: Mix{Normal: 1}, MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var view EndpointStats
	for _, e := range res.Endpoints {
		if e.Name == "view" {
			view = e
		}
	}
	if view.Count != 50 || view.Max < 1500 || view.P50 < 500 || res.LagMS < 1500 {
		t.Fatalf("view %+v, generator lag %.0f ms: want 50 views, the late ones' latency counted from their due time (max ≥ 1.5 s)", view, res.LagMS)
	}
	if res.Funnel.Stock != 50 {
		t.Errorf("funnel %+v: every purchase told sold out by the ceiling", res.Funnel)
	}
}
