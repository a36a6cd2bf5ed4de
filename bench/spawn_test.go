package bench

import (
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestWaitHTTPExited: a child that exits before it answers is reported at
// once as errExited, not after waitHTTP's 30 s.
func TestWaitHTTPExited(t *testing.T) {
	c, err := startChild(exec.Command("sh", "-c", "exit 3"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = waitHTTP(t.Context(), "http://"+addr+"/", 409, c.done)
	if !errors.Is(err, errExited) || time.Since(start) > 10*time.Second {
		t.Fatalf("waitHTTP on an exited child: %v after %v, want errExited at once", err, time.Since(start))
	}
}
