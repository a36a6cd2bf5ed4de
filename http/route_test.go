package http

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/flashsale/flashsale"
)

// muxMatch is what the ServeMux does with method and target: the pattern
// it serves it with and the {id} it gives the handler.
func muxMatch(t *testing.T, s *Server, method, target string) (pattern, id string, ok bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", "", false
	}
	r := &http.Request{Method: method, URL: u, Host: "example.com", Header: http.Header{}}
	_, pattern = s.mux.Handler(r)
	if pattern != purchaseRoute && pattern != tokenRoute {
		return pattern, "", true
	}
	// The id the handler would see: route it through a mux of the same
	// pattern that records it.
	m := http.NewServeMux()
	m.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) { id = r.PathValue("id") })
	m.ServeHTTP(discardWriter{}, r)
	return pattern, id, true
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// checkFastRoute fails when fastRoute takes a request the mux would serve
// otherwise: another route, a redirect to a cleaned path, another id.
func checkFastRoute(t *testing.T, s *Server, method, target string) (taken bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return false
	}
	r := &http.Request{Method: method, URL: u, Host: "example.com", Header: http.Header{}}
	h, id := s.fastRoute(r)
	if h == nil {
		return false
	}
	pattern, muxID, ok := muxMatch(t, s, method, target)
	if !ok || pattern != r.Pattern || muxID != id {
		t.Fatalf("%s %s: fastRoute took it as %q id %q; the mux serves it as %q id %q", method, target, r.Pattern, id, pattern, muxID)
	}
	return true
}

// TestFastRoute checks the purchase and token routes matched by hand
// agree with the ServeMux on every path it would serve them, and leave it
// everything else.
func TestFastRoute(t *testing.T) {
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: testAdmin})
	for _, tt := range []struct {
		method, target string
		taken          bool
	}{
		{"POST", "/api/sales/01ABC/purchase", true},
		{"POST", "/api/sales/01ABC/token", true},
		{"POST", "/api/sales/a%20b/purchase", true},
		{"POST", "/api/sales/01ABC/purchase?x=1", true},
		{"GET", "/api/sales/01ABC/purchase", false},
		{"PUT", "/api/sales/01ABC/token", false},
		{"POST", "/api/sales//purchase", false},
		{"POST", "/api/sales/./purchase", false},
		{"POST", "/api/sales/../purchase", false},
		{"POST", "/api/sales/a/b/purchase", false},
		{"POST", "/api/sales/a%2Fb/purchase", false},
		{"POST", "/api/sales/01ABC/purchase/", false},
		{"POST", "/api/sales/01ABC/challenge", false},
		{"POST", "/api//sales/01ABC/purchase", false},
		{"POST", "/api/sales/01ABC", false},
		{"POST", "/api/orders/01ABC/cancel", false},
	} {
		if got := checkFastRoute(t, s, tt.method, tt.target); got != tt.taken {
			t.Errorf("%s %s: taken %v, want %v", tt.method, tt.target, got, tt.taken)
		}
	}
}

// FuzzFastRoute checks fastRoute against the ServeMux on any target.
func FuzzFastRoute(f *testing.F) {
	for _, s := range []string{"/api/sales/x/purchase", "/api/sales/x/token", "/api/sales/%2e%2e/purchase", "/api/sales/x%2F/token", "/api/sales/./token"} {
		f.Add("POST", s)
	}
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: testAdmin})
	f.Fuzz(func(t *testing.T, method, target string) {
		checkFastRoute(t, s, method, target)
	})
}
