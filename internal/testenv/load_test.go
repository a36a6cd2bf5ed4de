package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestAloneWaitsForShare: a process that shares the load keeps Alone
// waiting until it exits, and Alone's holder keeps a new sharer waiting.
func TestAloneWaitsForShare(t *testing.T) {
	if os.Getenv("TESTENV_SHARER") != "" {
		Share()
		os.Stdout.WriteString("shared\n")
		time.Sleep(time.Second)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAloneWaitsForShare$")
	cmd.Env = append(os.Environ(), "TESTENV_SHARER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "shared\n" {
		t.Fatalf("sharer: %q %v", line, err)
	}
	start := time.Now()
	Alone(t)
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Errorf("Alone returned after %v while another process shared the load for a second", waited)
	}

	// Now a new sharer waits for this test to end.
	got := make(chan time.Time, 1)
	go func() {
		f, err := lockFile(loadLock)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if err := flock(f, syscall.LOCK_SH); err == nil {
			got <- time.Now()
		}
	}()
	select {
	case <-got:
		t.Fatal("a sharer took the load lock while Alone held it")
	case <-time.After(300 * time.Millisecond):
	}
}
