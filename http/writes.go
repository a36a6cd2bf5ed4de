package http

import (
	"net/http"
	"time"
)

// WriteTimeoutDefault bounds the writing of one answer (BoundWrites).
const WriteTimeoutDefault = 30 * time.Second

// BoundWrites gives every answer a write deadline d from when its handler
// starts, as http.Server.WriteTimeout would, so a client that stops
// reading cannot hold a handler writing a page, a list or a CSV forever;
// but for two kinds. A purchase or a token request (hotRoute's two
// routes) is answered in under a kilobyte, which any socket buffer takes
// at once; the event streams bound each write themselves. The server's
// WriteTimeout set a timer and cleared it on every request: about 4% of
// a sold-out answer's CPU (docs/benchmarks.md). Wrap the outermost
// handler with it, so the deadline reaches the connection.
func BoundWrites(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pattern, _ := hotRoute(r); pattern == "" && !isEventStream(r) {
			// ErrNotSupported only from a writer that hides the
			// connection: then the answer has no deadline, as before.
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}
