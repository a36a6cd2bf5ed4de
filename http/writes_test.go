package http

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBoundWrites: an answer to a client that stops reading gives its
// handler a write error once the deadline passes; a purchase, a token and
// an event stream have no such deadline (a slow answer to them still
// arrives after it).
func TestBoundWrites(t *testing.T) {
	const d = 200 * time.Millisecond
	wrote := make(chan error, 1)
	srv := httptest.NewServer(BoundWrites(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/admin/sales/s1/orders" {
			chunk := make([]byte, 1<<20)
			for range 256 { // far more than the socket buffers take
				if _, err := w.Write(chunk); err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
			return
		}
		time.Sleep(2 * d)
		fmt.Fprint(w, "late but whole")
	}), d))
	defer srv.Close()

	t.Run("a client that stops reading", func(t *testing.T) {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /api/admin/sales/s1/orders HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
		select {
		case err := <-wrote:
			if err == nil {
				t.Fatal("256 MB written to a client that reads nothing")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the handler still writing 10 s after its deadline")
		}
	})
	for _, tc := range []struct{ method, path string }{
		{"POST", "/api/sales/s1/purchase"},
		{"POST", "/api/sales/s1/token"},
		{"GET", "/api/sales/s1/events"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", tc.method, tc.path)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("answer after the deadline: %v", err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil || b.String() != "late but whole" {
				t.Fatalf("body %q, %v", b.String(), err)
			}
		})
	}
}
