package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestUnknownSettingStopsServe: the case, end to end. A misspelled
// FLASHSALE_REDISURL used to start the embedded SQLite shape without a
// word; now serve exits 2 before anything starts and says what was meant.
func TestUnknownSettingStopsServe(t *testing.T) {
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a serve that starts never exits
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "FLASHSALE_REDISURL=redis://127.0.0.1:1", "FLASHSALE_ADDR=127.0.0.1:0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("serve with FLASHSALE_REDISURL: %v, want exit 2\n%s", err, stderr.String())
	}
	if want := "flashsale: unknown setting FLASHSALE_REDISURL; did you mean FLASHSALE_REDIS_URL?"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant %q", stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "listening") {
		t.Errorf("serve started anyway:\n%s", stderr.String())
	}
}
