package testenv

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// FreeAddr is FreePort as a host:port.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(tb)))
}

// WaitUntil polls cond every 20 ms until it holds or within passes. It
// reports whether cond held, and if not fails the test with what was
// awaited, without stopping it: it may run in a storm's fault goroutine,
// where FailNow must not be called. A test that cannot go on checks the
// result and returns.
func WaitUntil(tb testing.TB, within time.Duration, what string, cond func() bool) bool {
	tb.Helper()
	for until := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(until) {
			tb.Errorf("gave up after %v waiting for %s", within, what)
			return false
		}
	}
	return true
}
