package bench

import (
	"io"
	"net"
	"net/http"
	"time"
)

// ceilingBody is what the ceiling answers to everything: a sold-out purchase.
var ceilingBody = []byte(`{"error":{"code":"sold_out","message":"sold out"}}`)

// CeilingHandler is the cheapest possible endpoint, the handler of
// ../shared/bench/ceiling: it reads the body and answers a small JSON 409.
// Every figure is also quoted as a ratio to it, measured with the same
// client in the same run, because absolute numbers on a shared machine
// mean little. Run it in a process of its own, as the server is.
func CeilingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		w.Write(ceilingBody)
	})
}

// ServeCeiling serves CeilingHandler on ln until it fails.
func ServeCeiling(ln net.Listener) error {
	srv := &http.Server{Handler: CeilingHandler(), ReadHeaderTimeout: 5 * time.Second}
	return srv.Serve(ln)
}
