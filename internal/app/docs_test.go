package app

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

//go:generate go test -count=1 -run ^TestConfigurationDoc$ -update .

var update = flag.Bool("update", false, "rewrite docs/configuration.md's settings table from the settings")

const (
	configurationDoc = "../../docs/configuration.md"
	settingsBegin    = "<!-- BEGIN settings: generated from the settings table in internal/app/settings.go by `go generate ./internal/app`; edit that table, not this one -->\n"
	settingsEnd      = "<!-- END settings -->\n"
)

// settingsMarkdown is docs/configuration.md's table of every setting, in
// the order of the settings table and with its words, so the reference
// says what serve --help says.
func settingsMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | flag | default | meaning | migrate reads it |\n|---|---|---|---|---|\n")
	// A meaning may name <queue name>: Markdown would take it for a tag.
	esc := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")
	for _, s := range settings {
		def := "none"
		if s.def != "" {
			def = "`" + s.def + "`"
		}
		migrate := ""
		if s.migrate {
			migrate = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s | %s |\n", s.env, s.flagName(), def, esc.Replace(s.help), migrate)
	}
	return b.String()
}

// TestConfigurationDoc: docs/configuration.md's settings table is the one
// settingsMarkdown makes from the settings table, so the reference cannot
// fall behind the code. With -update (go generate ./internal/app) it
// rewrites the table instead; the prose around it is left alone.
func TestConfigurationDoc(t *testing.T) {
	doc, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := bytes.Cut(doc, []byte(settingsBegin))
	if !ok {
		t.Fatalf("%s has no line %q", configurationDoc, settingsBegin)
	}
	table, after, ok := bytes.Cut(rest, []byte(settingsEnd))
	if !ok {
		t.Fatalf("%s has no line %q after the table", configurationDoc, settingsEnd)
	}
	want := settingsMarkdown()
	if string(table) == want {
		return
	}
	if *update {
		out := bytes.Join([][]byte{before, []byte(settingsBegin), []byte(want), []byte(settingsEnd), after}, nil)
		if err := os.WriteFile(configurationDoc, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the settings table of %s", configurationDoc)
		return
	}
	got := strings.Split(string(table), "\n")
	for i, w := range strings.Split(want, "\n") {
		if i >= len(got) || got[i] != w {
			g := "(nothing)"
			if i < len(got) {
				g = got[i]
			}
			t.Fatalf("%s's settings table differs from the settings at line %d of the table:\n got: %s\nwant: %s\nrun go generate ./internal/app to rewrite it", configurationDoc, i+1, g, w)
		}
	}
	t.Fatalf("%s's settings table has lines the settings do not; run go generate ./internal/app to rewrite it", configurationDoc)
}

// TestConfigurationDocNames: every FLASHSALE_* variable the rest of
// docs/configuration.md talks about (the notes under the table) is a
// setting, and every setting has a note, so a new one is explained
// beyond its line of --help.
func TestConfigurationDocNames(t *testing.T) {
	doc, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(doc, []byte(settingsEnd))
	known := map[string]bool{}
	for _, s := range settings {
		known[s.env] = true
		if s.fileOf != "" {
			continue // the _FILE twins share one note, under "Secrets"
		}
		if !bytes.Contains(rest, []byte("- `"+s.env+"`")) {
			t.Errorf("%s has no note (a line starting - `%s`) below its table", configurationDoc, s.env)
		}
	}
	for _, v := range regexp.MustCompile(`FLASHSALE_[A-Z0-9_]*[A-Z0-9]`).FindAll(rest, -1) {
		if !known[string(v)] && !bytes.HasPrefix(v, []byte("FLASHSALE_TEST_")) {
			t.Errorf("%s names %s, which is no setting", configurationDoc, v)
		}
	}
}
