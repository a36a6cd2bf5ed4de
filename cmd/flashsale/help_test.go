package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: help, -h and --help succeed at every level and print that
// level's usage; serve --help lists every setting with its flag, variable
// and default, migrate only the database's; --print-config prints the
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
		{"bench", "--help"}, {"token", "--help"}, {"token", "-h"},
	} {
		out, err := runOut(args...)
		if err != nil || !strings.Contains(out, "usage: flashsale") {
			t.Errorf("%v: %v, output %q; want success and a usage", args, err, out)
		}
	}
	out, _ := runOut("serve", "--help")
	for _, s := range settings {
		if !strings.Contains(out, "--"+s.flagName()) || !strings.Contains(out, s.env) {
			t.Errorf("serve --help does not list %s (--%s)", s.env, s.flagName())
		}
	}
	out, _ = runOut("migrate", "--help")
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
	for _, args := range [][]string{{}, {"nope"}, {"serve", "extra"}, {"serve", "--nope"}, {"serve", "--order-rate", "fast"}} {
		if _, err := runOut(args...); err == nil {
			t.Errorf("%v succeeded", args)
		}
	}
}
