package app

import (
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestLimitMemory: the runtime's memory limit is 90% of the container's,
// so GOGC's headroom never takes the heap past it; GOMEMLIMIT, when set,
// wins; no container limit leaves the runtime without one.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := slog.New(slog.DiscardHandler)
	var pod uint64 = 512 << 20

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "") // restored after the test: unset for it
	os.Unsetenv("AUTOMEMLIMIT")
	limitMemory(memlimit.Limit(pod), log)
	if got, want := debug.SetMemoryLimit(-1), int64(float64(pod)*memoryRatio); got != want {
		t.Fatalf("under a %d-byte container: memory limit %d, want %d", pod, got, want)
	}

	debug.SetMemoryLimit(before)
	limitMemory(func() (uint64, error) { return 0, memlimit.ErrNoLimit }, log)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("without a container limit: memory limit %d, want the runtime's %d", got, before)
	}

	debug.SetMemoryLimit(before)
	t.Setenv("GOMEMLIMIT", "300MiB")
	limitMemory(memlimit.Limit(pod), log)
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("with GOMEMLIMIT set: memory limit %d, want it left to the runtime (%d)", got, before)
	}
}
