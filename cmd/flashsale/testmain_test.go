package main

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/flashsale/flashsale/bench"
)

// TestMain lets this test binary stand in for flashsale where bench starts
// its own executable as the ceiling's process (spawnCeiling, when
// ../shared/bench/ceiling is not beside the checkout): under go test that
// executable is this binary, which would otherwise run every test again
// instead of serving the ceiling.
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
	os.RemoveAll(dir)
	os.Exit(code)
}

// binDir holds the binary buildBinary builds once for the whole run.
var binDir string
