package http

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
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
	s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, Now: func() time.Time { return t0 }})
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc.got = ""
			var h []string
			if tt.header != "-" {
				h = []string{requestIDHeader, tt.header}
			}
			w := do(t, s, "POST", "/api/sales/s1/purchase", "alice", `{"check_in":"`+testenv.Night(0)+`","nights":1,"rooms":1}`,
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
		c := newRequestCtx(r.Context(), 0)
		c.identify(w, r)
		got := flashsale.RequestID(c)
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

// withDeadline is a request context with only a deadline.
func withDeadline(parent context.Context, d time.Duration) (*requestCtx, func()) {
	c := newRequestCtx(parent, d)
	return c, c.release
}

func TestDeadlineCtx(t *testing.T) {
	t.Run("ErrWithoutDone", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), 20*time.Millisecond)
		defer release()
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
			t.Fatalf("Deadline = %v, %v", d, ok)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("Err before the deadline = %v", err)
		}
		time.Sleep(30 * time.Millisecond)
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("Done", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), 20*time.Millisecond)
		defer release()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done never closed after the deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", ctx.Err())
		}
	})
	t.Run("ParentCancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, release := withDeadline(parent, time.Hour)
		defer release()
		derived, stop := context.WithCancel(ctx) // as database/sql would
		defer stop()
		cancel()
		select {
		case <-derived.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from it missed the parent's cancel")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", ctx.Err())
		}
	})
	t.Run("EarlierParentDeadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		ctx, release := withDeadline(parent, time.Hour)
		defer release()
		if d, _ := ctx.Deadline(); time.Until(d) > time.Second {
			t.Fatalf("Deadline %v ignores the parent's earlier one", d)
		}
	})
	t.Run("ReleaseAfterDone", func(t *testing.T) {
		// The request ends while a derived context waits: Done closes, and
		// Err must say why (a nil Err with a closed Done panics the
		// context package).
		ctx, release := withDeadline(context.Background(), time.Hour)
		derived, stop := context.WithCancel(ctx)
		defer stop()
		_ = ctx.Done() // makes the timer, as database/sql would
		release()
		select {
		case <-derived.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("release did not reach a derived context")
		}
		if ctx.Err() == nil || derived.Err() == nil {
			t.Fatalf("Err after release = %v, %v; want an error with Done closed", ctx.Err(), derived.Err())
		}
	})
	t.Run("ReleaseWithoutDone", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), time.Hour)
		release()
		if ctx.timed != context.Background() {
			t.Fatal("release made a timer nobody asked for")
		}
	})
}
