package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestMain lets this test binary stand in for flashsale where bench starts
// its own executable as the ceiling's process (spawnCeiling, when
// ../shared/bench/ceiling is not beside the checkout): under go test that
// executable is this binary, which would otherwise run every test again
// instead of serving the ceiling. A run whose tests pass fails if they
// left a goroutine behind (checkLeaks).
//
// The tests that call t.Parallel spend most of their time waiting (a
// fault window, a writer slowed by FLASHSALE_ORDER_RATE, a heal) on
// processes, a Redis, a queue and a database of their own: they run two
// at a time (go test's -parallel, GOMAXPROCS by default) after the others.
// Run one at a time they used 11-50% of the two cores, and made this
// package CI's critical path (about 17 of its 21 minutes). A test that
// asserts a latency or a rate stays serial.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "bench" && os.Args[2] == bench.ServeCeilingFlag {
		if err := bench.Command(context.Background(), os.Args[2:], os.Getenv, io.Discard, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "flashsale-test-bin-")
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	stopBrowser()
	if code == 0 {
		code = checkLeaks()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// checkLeaks fails a passing run if a goroutine a test started is still
// running once every test and its cleanup is done: each must end with its
// owner's Close (a server's, a client's, a store's, a cluster's stop). It
// waits up to 10 s for them to go: a connection's reader ends only when it
// reads the end its peer (an instance killed by a cleanup) sent.
func checkLeaks() int {
	var err error
	if testenv.Poll(10*time.Second, 100*time.Millisecond, func() bool { err = goleak.Find(); return err == nil }) {
		return 0
	}
	fmt.Fprintf(os.Stderr, "goleak: goroutines left running after a successful run: %v\n", err)
	return 1
}

// binDir holds the binary buildBinary builds once for the whole run.
var binDir string
