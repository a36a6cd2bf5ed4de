package http

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// lockedBuffer is a log sink the summary's goroutine and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON lines logged with msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLog: requests that went well get one line in Sample, the
// flood's own refusals (409) too; every other 4xx gets a line; the summary
// counts every request of each route by status class with its p99, and
// starts again.
func TestAccessLog(t *testing.T) {
	var out lockedBuffer
	a := newAccessLog(slog.New(slog.NewJSONHandler(&out, nil)), 10, 0)
	t.Cleanup(func() { a.Close() })
	sold := &stubService{}
	s := NewServer(flashsale.ServiceOf(sold), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }, AccessLog: a})
	for range 100 {
		if w := do(t, s, "GET", "/api/sales", "", ""); w.Code != http.StatusOK {
			t.Fatalf("list: %d", w.Code)
		}
	}
	for range 7 {
		do(t, s, "GET", "/nowhere", "", "")
	}
	sold.err = flashsale.ErrSoldOut
	for range 30 {
		if w := do(t, s, "POST", "/api/sales/01JSALE/purchase", "alice", `{"rooms":1,"check_in":"`+testenv.Night(0)+`"}`); w.Code != http.StatusConflict {
			t.Fatalf("purchase: %d %s", w.Code, w.Body)
		}
	}
	count := map[string]int{}
	for _, l := range out.lines(t, "request") {
		count[l["route"].(string)+" "+jsonInt(l["status"])]++
		if sampled := l["sample"] != nil; sampled != (l["status"] != 404.0) {
			t.Errorf("line %v: sampled %v", l, sampled)
		}
		if id, _ := l["request_id"].(string); id == "" {
			t.Errorf("line %v has no request_id: it cannot be matched to the answer", l)
		}
	}
	if want := map[string]int{"GET /api/sales 200": 10, "unmatched 404": 7, "POST /api/sales/{id}/purchase 409": 3}; !equalCounts(count, want) {
		t.Fatalf("request lines %v, want %v", count, want)
	}

	// The line names the id the client sent (and got back).
	w := do(t, s, "GET", "/nowhere", "", "", "X-Request-ID", "trace-4711")
	if got := w.Header().Get("X-Request-Id"); got != "trace-4711" {
		t.Fatalf("answer's X-Request-Id = %q", got)
	}
	lines := out.lines(t, "request")
	if last := lines[len(lines)-1]; last["request_id"] != "trace-4711" {
		t.Errorf("the line of a request sent with X-Request-ID trace-4711: %v", last)
	}

	a.summarize()
	sum := map[string]map[string]any{}
	for _, l := range out.lines(t, "requests") {
		sum[l["route"].(string)] = l
	}
	for route, want := range map[string][2]float64{"GET /api/sales": {100, 100}, "unmatched": {8, 0}, "POST /api/sales/{id}/purchase": {30, 0}} {
		l := sum[route]
		if l == nil || l["count"] != want[0] || l["status_2xx"] != want[1] || l["status_2xx"].(float64)+l["status_4xx"].(float64) != want[0] ||
			l["status_5xx"] != 0.0 || !(l["p99_ms"].(float64) > 0) {
			t.Errorf("summary of %s = %v, want count %v, 2xx %v", route, l, want[0], want[1])
		}
	}
	if len(sum) != 3 {
		t.Errorf("summaries of routes without traffic: %v", sum)
	}
	a.summarize()
	if n := len(out.lines(t, "requests")); n != 3 {
		t.Errorf("a second summary without traffic wrote %d lines in all, want the first 3", n)
	}

	// A flood of anonymous 4xx (issue 23: 2 000 bad purchases were 2 003
	// lines) gets clientErrorLines lines a second; the summary counts the rest.
	before := len(out.lines(t, "request"))
	for range 2000 {
		if w := do(t, s, "POST", "/api/sales/01JSALE/purchase", "", `{}`); w.Code != http.StatusUnauthorized {
			t.Fatalf("anonymous purchase: %d", w.Code)
		}
	}
	if n := len(out.lines(t, "request")) - before; n != clientErrorLines {
		t.Errorf("2 000 anonymous 401s: %d lines, want %d", n, clientErrorLines)
	}
	a.summarize()
	lines = out.lines(t, "requests")
	if last := lines[len(lines)-1]; last["status_4xx"] != 2000.0 || last["unlogged_4xx"] != float64(2000-clientErrorLines) {
		t.Errorf("summary after the flood: %v, want 2000 4xx, %d unlogged", last, 2000-clientErrorLines)
	}
	// The next second has lines again.
	do(t, s, "POST", "/api/sales/01JSALE/purchase", "", `{}`)
	if n := len(out.lines(t, "request")) - before; n != clientErrorLines+1 {
		t.Errorf("a 401 after the summary: %d lines in all, want %d", n, clientErrorLines+1)
	}
}

func jsonInt(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestLatencyBuckets: each latency falls in a bucket whose upper bound is
// above it by at most a fifth (a quarter below 8 µs), and the buckets grow
// in order.
func TestLatencyBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 3 * time.Microsecond, 4 * time.Microsecond, 7 * time.Microsecond,
		8 * time.Microsecond, 999 * time.Microsecond, time.Millisecond, 37 * time.Millisecond, 200 * time.Millisecond, 3 * time.Second} {
		i := latencyBucket(d)
		up := latencyUpper(i)
		if d >= up || (i > 0 && d < latencyUpper(i-1)) {
			t.Errorf("%v: bucket %d, [%v, %v)", d, i, latencyUpper(i-1), up)
		}
		if d >= 8*time.Microsecond && float64(up) > 1.25*float64(d)+float64(time.Microsecond) {
			t.Errorf("%v: bucket's upper bound %v", d, up)
		}
	}
	for i := 1; i < latencyBuckets; i++ {
		if latencyUpper(i) <= latencyUpper(i-1) {
			t.Fatalf("bucket %d's bound %v after %v", i, latencyUpper(i), latencyUpper(i-1))
		}
	}
	b := make([]uint64, latencyBuckets)
	b[latencyBucket(time.Millisecond)] = 99
	b[latencyBucket(time.Second)] = 1
	if got := quantile(b, 100, 0.99); got < time.Millisecond || got > 1250*time.Microsecond {
		t.Errorf("p99 of 99×1ms, 1×1s = %v", got)
	}
}

// BenchmarkHandlerPurchaseSoldOutAccessLog is BenchmarkHandlerPurchaseSoldOut
// with the access log on: a request without a line adds no allocation.
func BenchmarkHandlerPurchaseSoldOutAccessLog(b *testing.B) {
	a := NewAccessLog(slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLogSampleDefault)
	b.Cleanup(func() { a.Close() })
	s := NewServer(flashsale.ServiceOf(&stubService{soldOut: true}), Config{JWTSecret: testSecret, AdminToken: testAdmin,
		Now: func() time.Time { return t0 }, AccessLog: a})
	benchmarkSoldOut(b, s)
}

// benchmarkSoldOut answers the same sold-out purchase through s.
func benchmarkSoldOut(b *testing.B, s *Server) {
	tok := "Bearer " + sign(b, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	h := s.Handler()
	body := []byte(`{"rooms":1,"check_in":"` + testenv.Night(0) + `"}`)
	r := httptest.NewRequest("POST", "/api/sales/01JSALE/purchase", nil)
	r.Header.Set("Authorization", tok)
	b.ReportAllocs()
	for b.Loop() {
		r.Body = io.NopCloser(bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusConflict {
			b.Fatalf("status %d", w.Code)
		}
	}
}
