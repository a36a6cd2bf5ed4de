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

// TestUnknownSettings: a FLASHSALE_* variable that is no setting is
// refused, naming the nearest setting when there is one a few edits away;
// settings, the test suite's own variables and other programs' are not.
func TestUnknownSettings(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want []string // each in the error; none: no error
	}{
		{[]string{"FLASHSALE_REDIS_URL=redis://x", "PATH=/bin", "FLASHSALE_TEST_REDIS_URL=redis://y", "REDIS_URL=z"}, nil},
		{[]string{"FLASHSALE_REDISURL=redis://x"}, []string{"unknown setting FLASHSALE_REDISURL; did you mean FLASHSALE_REDIS_URL?"}},
		{[]string{"FLASHSALE_AMQP_ULR=amqp://x"}, []string{"did you mean FLASHSALE_AMQP_URL?"}},
		{[]string{"FLASHSALE_ADMIN_TOKENS=x"}, []string{"did you mean FLASHSALE_ADMIN_TOKEN?"}},
		{[]string{"FLASHSALE_COLOUR_SCHEME=dark"}, []string{"unknown setting FLASHSALE_COLOUR_SCHEME\n"}},
		{[]string{"FLASHSALE_REDISURL=a", "FLASHSALE_DATABSE_URL=b"}, []string{"FLASHSALE_REDIS_URL?", "FLASHSALE_DATABASE_URL?", "serve --help"}},
		{[]string{"FLASHSALE_="}, []string{"unknown setting FLASHSALE_\n"}},
	} {
		err := unknownSettings(tt.env)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v, want no error", tt.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error, want %q", tt.env, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error()+"\n", w) {
				t.Errorf("%v: %q, want it to say %q", tt.env, err, w)
			}
		}
	}
}

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
