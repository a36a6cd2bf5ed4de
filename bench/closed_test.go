package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// runLoopAt runs l against h in a test server and returns the result and
// how long Run took.
func runLoopAt(t *testing.T, h http.Handler, l Loop) (*Result, time.Duration, *Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, "a", "s", l.Conns)
	t.Cleanup(c.CloseIdle)
	start := time.Now()
	res, err := Run(t.Context(), Config{Client: c, SaleID: "x", Shape: l, Users: "t-"})
	if err != nil {
		t.Fatal(err)
	}
	return res, time.Since(start), c
}

// TestLoopSoldOut: the sold-out loop sends one guest's purchase back to
// back until the duration is up, and counts every answer the server gave,
// no more and no fewer.
func TestLoopSoldOut(t *testing.T) {
	var n atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[r.Method+" "+r.URL.Path+" "+string(b)+" "+r.Header.Get("Authorization")] = true
		mu.Unlock()
		n.Add(1)
		CeilingHandler().ServeHTTP(w, r)
	})
	const d = 300 * time.Millisecond
	res, took, _ := runLoopAt(t, h, Loop{Path: LoopSoldOut, Conns: 8, Duration: d})
	if got := int64(res.Requests); got != n.Load() || res.Sessions != res.Requests || got == 0 {
		t.Fatalf("%d requests counted, %d sessions, the server answered %d", got, res.Sessions, n.Load())
	}
	if len(res.Outcomes) != 1 || res.Outcomes[0] != (Outcome{Endpoint: "purchase", Status: 409, Code: "sold_out", Count: res.Requests}) {
		t.Errorf("outcomes %+v: want every purchase 409 sold_out", res.Outcomes)
	}
	if len(seen) != 1 {
		t.Errorf("requests %v: want one guest's POST /api/sales/x/purchase {\"token\":\"t\"}, always the same", seen)
	}
	if res.Seconds < d.Seconds()*0.9 || took > d+time.Second {
		t.Errorf("ran %s (%.2f s to the last answer): want it to stop once %s is up", took, res.Seconds, d)
	}
	if res.Loop != LoopSoldOut || res.Conns != 8 || res.SessionRate <= 0 || res.LagMS != 0 {
		t.Errorf("result loop %q, conns %d, sessions/s %.0f, lag %.0f ms", res.Loop, res.Conns, res.SessionRate, res.LagMS)
	}
	if inv := soldOutAnswers(res); !inv.OK {
		t.Errorf("answers broken against a server that only says sold out: %s", inv.Detail)
	}
}

// TestLoopSoldOutBroken: a sale of no rooms that answers a purchase 202
// (an oversell) or 500 breaks the sold-out loop's answers invariant in
// the check; a 429 is counted, not broken.
func TestLoopSoldOutBroken(t *testing.T) {
	for _, status := range []int{202, 500, 429} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var n atomic.Int64
			mux := http.NewServeMux()
			mux.HandleFunc("POST /api/sales/x/purchase", func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"order_id":"o%d","error":{"code":"c"}}`, n.Add(1))
			})
			mux.HandleFunc("GET /api/admin/sales/x/audit", func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"balanced":true,"nights":[{"date":"`+testenv.Night(0)+`","stock":0,"held":0,"sold":0,"in_flight":0}]}`)
			})
			res, _, c := runLoopAt(t, mux, Loop{Path: LoopSoldOut, Conns: 4, Duration: 100 * time.Millisecond})
			if status == 202 && len(res.Accepted) != int(n.Load()) {
				t.Errorf("%d 202s recorded for the check, the server gave %d", len(res.Accepted), n.Load())
			}
			ck, err := Verify(t.Context(), c, "x", 1, res, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(ck.Invariants, func(inv Invariant) bool { return inv.Name == InvAnswers })
			if i < 0 {
				t.Fatalf("no %s invariant in %+v", InvAnswers, ck.Invariants)
			}
			inv := ck.Invariants[i]
			if want := status != 429; inv.OK == want || want && !strings.Contains(inv.Detail, fmt.Sprintf("answered %d", status)) {
				t.Errorf("answered %d: %+v", status, inv)
			}
		})
	}
}

// TestLoopAccepted: each iteration of the accepted loop is a new guest
// with a token and one purchase, each 202 kept for the check; against
// the ceiling, which refuses the token too, the guest still buys.
func TestLoopAccepted(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var tokens, orders atomic.Int64
		var mu sync.Mutex
		guests := map[string]bool{}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /api/sales/x/token", func(w http.ResponseWriter, r *http.Request) {
			tokens.Add(1)
			w.WriteHeader(201)
			io.WriteString(w, `{"token":"tk"}`)
		})
		mux.HandleFunc("POST /api/sales/x/purchase", func(w http.ResponseWriter, r *http.Request) {
			if b, _ := io.ReadAll(r.Body); string(b) != `{"token":"tk"}` {
				w.WriteHeader(400)
				return
			}
			mu.Lock()
			guests[r.Header.Get("Authorization")] = true
			mu.Unlock()
			w.WriteHeader(202)
			fmt.Fprintf(w, `{"order_id":"o%d","status":"held"}`, orders.Add(1))
		})
		res, _, _ := runLoopAt(t, mux, Loop{Path: LoopAccepted, Conns: 16, Duration: 300 * time.Millisecond})
		if n := int(orders.Load()); n == 0 || tokens.Load() != orders.Load() || res.Sessions != n || len(res.Accepted) != n ||
			len(guests) != n || res.Requests != 2*n || res.Unknown != 0 {
			t.Fatalf("server: %d tokens, %d orders to %d guests; client: %d sessions, %d requests, %d 202s, %d unknown",
				tokens.Load(), n, len(guests), res.Sessions, res.Requests, len(res.Accepted), res.Unknown)
		}
		if res.AcceptedRate <= 0 || res.AcceptedRate != res.SessionRate {
			t.Errorf("accepted %.0f/s, sessions %.0f/s: want the same, every session a 202", res.AcceptedRate, res.SessionRate)
		}
	})
	t.Run("EndedBeforeTheWorkersRan", func(t *testing.T) {
		// A loop whose end passed before its workers were scheduled (a
		// loaded machine; here a nanosecond) still has each send once.
		res, _, _ := runLoopAt(t, CeilingHandler(), Loop{Path: LoopAccepted, Conns: 3, Duration: time.Nanosecond})
		if res.Sessions < 3 {
			t.Fatalf("%d sessions from 3 workers: want at least one each", res.Sessions)
		}
	})
	t.Run("Ceiling", func(t *testing.T) {
		// Half a second: at 100 ms a CI run on a loaded machine finished no session.
		res, _, _ := runLoopAt(t, CeilingHandler(), Loop{Path: LoopAccepted, Conns: 8, Duration: 500 * time.Millisecond})
		if res.Sessions == 0 || res.Requests != 2*res.Sessions || len(res.Accepted) != 0 {
			t.Fatalf("against the ceiling: %d sessions, %d requests, %d 202s: want two requests each, none accepted",
				res.Sessions, res.Requests, len(res.Accepted))
		}
	})
}
