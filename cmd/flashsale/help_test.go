package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/app"
)

// TestHelp: help, -h and --help succeed at every level and print that
// level's usage; serve --help lists every setting with its flag, variable
// and default (TestServeHelpListsSettings), migrate only the database's; --print-config prints the
// effective configuration with secrets masked; a stray argument or an
// unknown command fails.
func TestHelp(t *testing.T) {
	getenv := func(k string) string {
		switch k {
		case "FLASHSALE_ADMIN_TOKEN":
			return "very-secret-admin"
		case "FLASHSALE_DATABASE_URL":
			return "mysql://root:hunter2@127.0.0.1:3306/test"
		case "FLASHSALE_ORDER_RATE":
			return "250"
		}
		return ""
	}
	runOut := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(t.Context(), args, getenv, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"--help"}, {"help", "serve"},
		{"serve", "--help"}, {"serve", "-h"}, {"migrate", "--help"}, {"audit", "--help"},
		{"bench", "--help"}, {"token", "--help"}, {"token", "-h"}, {"help", "audit"},
	} {
		// Help asked for is an answer: on stdout (flashsale serve --help |
		// grep redis finds it), nothing on stderr, success.
		var out, errOut bytes.Buffer
		err := run(t.Context(), args, getenv, &out, &errOut)
		if err != nil || !strings.Contains(out.String(), "usage: flashsale") || errOut.Len() > 0 {
			t.Errorf("%v: %v, stdout %q, stderr %q; want success and a usage on stdout", args, err, out.String(), errOut.String())
		}
	}
	// Each command's help lists its own flags: audit's not serve's fifty.
	if out, _ := runOut("audit", "--help"); strings.Contains(out, "--order-rate") || !strings.Contains(out, "--sale") || strings.Contains(out, "--grace\n") {
		t.Errorf("audit --help:\n%s", out)
	}
	// One flag style (--flag, as serve's table), each default said once:
	// bench --help said "(default 32 and 256) (default 512)", token's and
	// bench's listed -flag.
	for _, cmd := range []string{"bench", "token", "audit"} {
		out, _ := runOut(cmd, "--help")
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default") > 1 || strings.HasPrefix(strings.TrimLeft(line, " "), "-") && !strings.HasPrefix(strings.TrimLeft(line, " "), "--") {
				t.Errorf("%s --help: %q", cmd, line)
			}
		}
	}
	out, _ := runOut("migrate", "--help")
	if !strings.Contains(out, "FLASHSALE_DATABASE_URL") || strings.Contains(out, "FLASHSALE_REDIS_URL") {
		t.Errorf("migrate --help lists what migrate does not read:\n%s", out)
	}
	out, err := runOut("serve", "--print-config", "--addr", "127.0.0.1:9999")
	if err != nil || !strings.Contains(out, "addr=127.0.0.1:9999") || !strings.Contains(out, "order_rate=250") {
		t.Errorf("--print-config: %v\n%s", err, out)
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "very-secret-admin") {
		t.Errorf("--print-config shows a secret:\n%s", out)
	}
	// A command line that cannot run is a usage error (exit 2), said once,
	// on stderr, with the usage.
	for _, tt := range []struct {
		args []string
		say  string
	}{
		{nil, "usage: flashsale"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"serve", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"serve", "--order-rate", "fast"}, `invalid value "fast" for flag -order-rate`},
		{[]string{"token"}, "--user is required"},
		{[]string{"token", "--user", "alice", "--ttl", "8760h"}, "--ttl must be positive and at most 24h0m0s"},
		{[]string{"token", "--user", "alice", "extra"}, "unexpected arguments"},
		{[]string{"bench", "extra"}, "unexpected arguments"},
		{[]string{"audit", "--nope"}, "flag provided but not defined: -nope"},
	} {
		var out, errOut bytes.Buffer
		err := run(t.Context(), tt.args, getenv, &out, &errOut)
		if !errors.Is(err, app.ErrUsage) {
			t.Errorf("%v: %v, want a usage error (exit 2)", tt.args, err)
		}
		if n := strings.Count(errOut.String(), tt.say); n != 1 || out.Len() > 0 {
			t.Errorf("%v: stderr says %q %d times, stdout %q:\n%s", tt.args, tt.say, n, out.String(), errOut.String())
		}
	}
}

// TestVersion: a binary built from a checkout says which commit it is
// (it said "dev" whatever it was built from). GOFLAGS here has
// -buildvcs=false, which a plain go build elsewhere does not.
func TestVersion(t *testing.T) {
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "flashsale")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if info, _ := exec.Command("go", "version", "-m", bin).Output(); !strings.Contains(string(info), "vcs.revision=") {
		t.Skip("go build recorded no commit here (a git worktree): nothing to name")
	}
	out, err := exec.Command(bin, "version").Output()
	if want := "commit " + string(rev[:12]); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("version: %q %v, want it to name %q", out, err, want)
	}
}
