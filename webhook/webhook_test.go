package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

var secret = []byte("0123456789abcdef-secret")

func notice() flashsale.Notice {
	o := &flashsale.Order{ID: "o1", SaleID: "s1", UserID: "alice", Status: flashsale.OrderHeld, CheckIn: "2026-12-24",
		Nights: 1, Rooms: 1, Amount: 39900, Currency: "CNY", HoldExpiresAt: time.Unix(1_800_000_000, 0)}
	return flashsale.OrderNotice(o, time.Unix(1_799_999_970, 0))
}

func TestDeliver(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		st := status
		mu.Unlock()
		w.WriteHeader(st)
	}))
	defer srv.Close()
	s, err := New(srv.URL, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := notice()
	if st, err := s.Deliver(t.Context(), n); err != nil || st != http.StatusNoContent {
		t.Fatalf("Deliver = %d, %v", st, err)
	}
	r := got[0]
	if r.Method != "POST" || r.Header.Get(EventIDHeader) != "o1.held" || r.Header.Get(EventTypeHeader) != "order.held" ||
		r.Header.Get("Content-Type") != "application/json" || string(bodies[0]) != string(n.Payload) {
		t.Fatalf("request %s %v body %s", r.Method, r.Header, bodies[0])
	}
	if err := Verify(secret, r.Header.Get(SignatureHeader), bodies[0], time.Now(), ToleranceDefault); err != nil {
		t.Fatalf("the receiver cannot verify the signature: %v", err)
	}
	if r.Header.Get(TestHeader) != "" {
		t.Errorf("a real sale's event has %s: %q", TestHeader, r.Header.Get(TestHeader))
	}
	n.Test = true
	if _, err := s.Deliver(t.Context(), n); err != nil || got[1].Header.Get(TestHeader) != "true" {
		t.Errorf("a test sale's event: %v, %s = %q, want true", err, TestHeader, got[1].Header.Get(TestHeader))
	}
	n.Test = false
	for _, st := range []int{http.StatusInternalServerError, http.StatusBadRequest, http.StatusFound} {
		mu.Lock()
		status = st
		mu.Unlock()
		if got, err := s.Deliver(t.Context(), n); err == nil || got != st {
			t.Errorf("receiver answering %d: Deliver = %d, %v; want the status and an error", st, got, err)
		}
	}
	srv.Close()
	if _, err := s.Deliver(t.Context(), n); err == nil {
		t.Error("Deliver to a closed server succeeded")
	}
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		url    string
		secret string
	}{{"ftp://x", string(secret)}, {"example.com/hook", string(secret)}, {"https://example.com/hook", "short"}} {
		if _, err := New(c.url, []byte(c.secret), nil); err == nil {
			t.Errorf("New(%q, %q) accepted", c.url, c.secret)
		}
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"o1.held"}`)
	now := time.Unix(1_800_000_000, 0)
	good := Sign(secret, now, body)
	flip := "0"
	if strings.HasSuffix(good, "0") {
		flip = "1"
	}
	if err := Verify(secret, good, body, now.Add(time.Minute), ToleranceDefault); err != nil {
		t.Fatalf("Verify(good) = %v", err)
	}
	for name, c := range map[string]struct {
		header string
		body   string
		at     time.Time
		secret string
	}{
		"Empty":       {"", string(body), now, string(secret)},
		"NoTimestamp": {"v1=" + strings.Repeat("0", 64), string(body), now, string(secret)},
		"NoSignature": {"t=1800000000", string(body), now, string(secret)},
		"BadTime":     {strings.Replace(good, "t=", "t=x", 1), string(body), now, string(secret)},
		"Old":         {good, string(body), now.Add(6 * time.Minute), string(secret)},
		"Future":      {good, string(body), now.Add(-6 * time.Minute), string(secret)},
		"OtherBody":   {good, `{"id":"o2.held"}`, now, string(secret)},
		"OtherSecret": {good, string(body), now, "another-secret-of-16"},
		"Tampered":    {good[:len(good)-1] + flip, string(body), now, string(secret)},
	} {
		if err := Verify([]byte(c.secret), c.header, []byte(c.body), c.at, ToleranceDefault); err == nil {
			t.Errorf("%s: Verify accepted %q", name, c.header)
		}
	}
}

func FuzzVerify(f *testing.F) {
	body := []byte(`{"id":"o1.held"}`)
	now := time.Unix(1_800_000_000, 0)
	f.Add(Sign(secret, now, body), body)
	f.Add("t=,v1=", []byte{})
	f.Add("t=1,v1=zz,t=2", body)
	f.Fuzz(func(t *testing.T, header string, b []byte) {
		// No header verifies two bodies: the signature covers the body.
		if Verify(secret, header, b, now, ToleranceDefault) == nil &&
			Verify(secret, header, append(b, 'x'), now, ToleranceDefault) == nil {
			t.Fatalf("%q verifies %q and %q", header, b, append(b, 'x'))
		}
	})
}
