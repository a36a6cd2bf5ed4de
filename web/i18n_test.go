package web

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestStringsBothLanguages: every string of the pages is in English and in
// Simplified Chinese, so a new view cannot ship half translated.
func TestStringsBothLanguages(t *testing.T) {
	b, err := os.ReadFile("static/i18n.js")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	zhAt := strings.Index(src, "'zh-CN': {")
	endAt := strings.Index(src, "\n};")
	if zhAt < 0 || endAt < zhAt {
		t.Fatal("i18n.js: no zh-CN dictionary")
	}
	key := regexp.MustCompile(`(?:^|[{,]\s*)'?([A-Za-z_][\w.]*)'?\s*:\s*'`)
	keys := func(s string) []string {
		var out []string
		for _, line := range strings.Split(s, "\n") {
			for _, m := range key.FindAllStringSubmatch(line, -1) {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return out
	}
	en, zh := keys(src[:zhAt]), keys(src[zhAt:endAt])
	if len(en) < 100 {
		t.Fatalf("read %d English keys: the pattern no longer fits i18n.js", len(en))
	}
	for _, k := range en {
		if _, ok := slices.BinarySearch(zh, k); !ok {
			t.Errorf("%s has no Chinese string", k)
		}
	}
	for _, k := range zh {
		if _, ok := slices.BinarySearch(en, k); !ok {
			t.Errorf("%s has no English string", k)
		}
	}
}
