package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMigrateBadSQLiteURL: a sqlite:// URL that sqlite.Open refuses (a
// query string) makes `flashsale migrate` fail with the reason and exit 1.
// The binary used to drop that error (a shadowed err in openStoreBoard) and
// call Migrate on a nil store: SIGSEGV, exit 2 and a goroutine dump.
func TestMigrateBadSQLiteURL(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, "migrate")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "FLASHSALE_DATABASE_URL=sqlite://x.db?cache=shared")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("migrate: %v, want a non-zero exit\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stderr.String()
	if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
		t.Fatalf("migrate panicked (exit %d):\n%s", exit.ExitCode(), out)
	}
	if exit.ExitCode() != 1 {
		t.Errorf("exit %d, want 1 (an error, not a usage or a crash)\n%s", exit.ExitCode(), out)
	}
	if !strings.Contains(out, "flashsale: open database:") || !strings.Contains(out, "invalid path") {
		t.Errorf("stderr does not say why the database did not open:\n%s", out)
	}
	if strings.Contains(stdout.String(), "up to date") {
		t.Errorf("migrate claims success:\n%s", stdout.String())
	}
}
