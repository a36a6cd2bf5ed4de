package procstat

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// TestCPU: this process's CPU grows while it computes, and a process that
// does not exist is an error.
func TestCPU(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(nil)
	for deadline := time.Now().Add(10 * time.Second); ; {
		for range 10_000 {
			sum = sha256.Sum256(sum[:])
		}
		now, err := CPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU grew by %v in 10 s of hashing: want 50 ms", now-before)
		}
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Error("CPU of a process that does not exist: no error")
	}
}
