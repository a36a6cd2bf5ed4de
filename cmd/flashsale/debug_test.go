package main

import (
	"net/http"
	"testing"

	"github.com/flashsale/flashsale/internal/app"
)

// TestDebugListener: pprof answers on its own listener when asked for, and
// never on the public port.
func TestDebugListener(t *testing.T) {
	m, cl := MustRunMain(t, func(c *app.Config) { c.DebugAddr = "127.0.0.1:0" })
	resp, err := http.Get("http://" + m.DebugAddr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof on the debug listener: %d", resp.StatusCode)
	}
	if status, _ := cl.do(t.Context(), "GET", "/debug/pprof/", "", nil, nil, nil); status != http.StatusNotFound {
		t.Fatalf("pprof on the public port: %d, want 404", status)
	}
	m2, _ := MustRunMain(t, nil)
	if m2.DebugAddr() != "" {
		t.Fatalf("debug listener on without FLASHSALE_DEBUG_ADDR: %s", m2.DebugAddr())
	}
}
