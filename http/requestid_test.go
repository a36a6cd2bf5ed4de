package http

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// ridService remembers the request id the purchase's context carried.
type ridService struct {
	stubService
	got string
}

func (s *ridService) Purchase(ctx context.Context, u flashsale.User, req flashsale.PurchaseRequest) (*flashsale.Order, error) {
	s.got = flashsale.RequestID(ctx)
	return s.stubService.Purchase(ctx, u, req)
}

// TestRequestID checks a valid X-Request-ID is kept, a bad one replaced and
// a missing one generated; the response echoes what the service saw.
func TestRequestID(t *testing.T) {
	tests := []struct {
		name   string
		header string // "-": none
		keep   bool
	}{
		{"Kept", "req-abc123", true},
		{"KeptMax", strings.Repeat("a", maxRequestID), true},
		{"Missing", "-", false},
		{"Empty", "", false},
		{"TooLong", strings.Repeat("a", maxRequestID+1), false},
		{"Space", "req abc", false},
		{"NewLine", "req\nforged=1", false},
		{"NonASCII", "req-é", false},
		{"Control", "req\x7f", false},
	}
	svc := &ridService{}
	s := NewServer(svc, Config{JWTSecret: testSecret, Now: func() time.Time { return t0 }})
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc.got = ""
			var h []string
			if tt.header != "-" {
				h = []string{requestIDHeader, tt.header}
			}
			w := do(t, s, "POST", "/api/sales/s1/purchase", "alice", `{"check_in":"2026-12-24","nights":1,"rooms":1}`,
				append(h, "Idempotency-Key", "k-"+tt.name)...)
			got := w.Header().Get(requestIDHeader)
			if svc.got != got {
				t.Fatalf("service saw request id %q, response says %q (status %d %s)", svc.got, got, w.Code, w.Body)
			}
			if tt.keep {
				if got != tt.header {
					t.Fatalf("request id = %q, want the client's %q", got, tt.header)
				}
				return
			}
			if len(got) != 16 || !validRequestID(got) {
				t.Fatalf("generated request id = %q, want 16 hex digits", got)
			}
			if seen[got] {
				t.Fatalf("generated request id %q twice", got)
			}
			seen[got] = true
		})
	}
}

// FuzzRequestID checks whatever a client sends as X-Request-ID, the id the
// server keeps is 1 to 64 printable ASCII characters, and is the client's
// exactly when that holds of it.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{"req-abc123", "", " ", "a\nb", "é", strings.Repeat("x", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header[requestIDHeader] = []string{in}
		w := httptest.NewRecorder()
		got := flashsale.RequestID(withRequestID(w, r))
		if w.Header().Get(requestIDHeader) != got {
			t.Fatalf("echoed %q, kept %q", w.Header().Get(requestIDHeader), got)
		}
		if len(got) < 1 || len(got) > maxRequestID {
			t.Fatalf("kept %q of %d bytes", got, len(got))
		}
		for _, c := range []byte(got) {
			if c <= ' ' || c > '~' {
				t.Fatalf("kept %q for %q", got, in)
			}
		}
		if (got == in) != validRequestID(in) {
			t.Fatalf("in %q: kept %q, valid %v", in, got, validRequestID(in))
		}
	})
}
