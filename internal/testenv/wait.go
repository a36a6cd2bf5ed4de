package testenv

import (
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no other test of this process was given: tests that run in
// parallel start processes on their ports a while after asking, and one
// restarts an instance on the port it had (free again while it is down).
func FreePort(tb testing.TB) int {
	tb.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		given.Lock()
		_, taken := given.ports[port]
		given.ports[port] = struct{}{}
		given.Unlock()
		if !taken {
			return port
		}
	}
	tb.Fatal("no port on 127.0.0.1 this process had not given out in 100 tries")
	return 0
}

// given is every port FreePort returned in this process.
var given = struct {
	sync.Mutex
	ports map[int]struct{}
}{ports: map[int]struct{}{}}

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
	if Poll(within, 20*time.Millisecond, cond) {
		return true
	}
	tb.Errorf("gave up after %v waiting for %s", within, what)
	return false
}

// Poll is WaitUntil's loop, for a caller that says itself what went
// wrong (with what the last call of cond saw) or polls at another pace:
// it calls cond every interval until it holds or within passes, and
// reports whether it held.
func Poll(within, every time.Duration, cond func() bool) bool {
	for until := time.Now().Add(within); !cond(); time.Sleep(every) {
		if time.Now().After(until) {
			return false
		}
	}
	return true
}
