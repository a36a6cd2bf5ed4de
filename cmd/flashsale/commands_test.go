package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunCommands(t *testing.T) {
	if err := run(t.Context(), []string{"version"}, func(string) string { return "" }, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"nope"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown command accepted")
	}
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "FLASHSALE_DATA_DIR" {
			return dir
		}
		return ""
	}
	// Run twice: the second has nothing to apply and must not say it
	// applied migrations (it did, issue 23).
	for range 2 {
		var out strings.Builder
		if err := run(t.Context(), []string{"migrate"}, getenv, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); strings.Contains(s, "applied") || !strings.Contains(s, "up to date") {
			t.Fatalf("migrate said %q", s)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "flashsale.db"))
	if err != nil {
		t.Fatalf("migrate made no database: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("database mode %v, want 0600: it holds every guest's orders", fi.Mode().Perm())
	}
}
