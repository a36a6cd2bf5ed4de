package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
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
		err := UnknownSettings(tt.env)
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

// TestLogFormat checks FLASHSALE_LOG_FORMAT takes text or json and names
// itself when given anything else.
func TestLogFormat(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, v := range []string{"text", "json"} {
		c, err := ParseConfig(nil, nil, env(map[string]string{"FLASHSALE_LOG_FORMAT": v}))
		if err != nil || c.LogFormat != v {
			t.Fatalf("%s: format %q, err %v", v, c.LogFormat, err)
		}
	}
	for _, v := range []string{"xml", "JSON", " json"} {
		_, err := ParseConfig(nil, nil, env(map[string]string{"FLASHSALE_LOG_FORMAT": v}))
		if err == nil || !strings.Contains(err.Error(), "FLASHSALE_LOG_FORMAT") {
			t.Fatalf("%q: err %v, want one naming FLASHSALE_LOG_FORMAT", v, err)
		}
	}
	var buf bytes.Buffer
	newLogger(Config{LogFormat: "json"}, &buf).Info("x", "k", 1)
	if !json.Valid(buf.Bytes()) {
		t.Fatalf("json logger wrote %q", buf.String())
	}
}

// TestServeHelpListsSettings: serve --help lists every setting with its
// flag and its variable.
func TestServeHelpListsSettings(t *testing.T) {
	var out bytes.Buffer
	fset := NewFlagSet("serve", []string{"--help"}, &out, io.Discard)
	if _, err := ParseConfig(fset, []string{"--help"}, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: %v, want flag.ErrHelp", err)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), "--"+s.flagName()) || !strings.Contains(out.String(), s.env) {
			t.Errorf("serve --help does not list %s (--%s)", s.env, s.flagName())
		}
	}
}
