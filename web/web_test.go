package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/metrics/family"
)

// apiStub stands for the JSON API: it answers every request it gets.
var apiStub = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTeapot)
	w.Write([]byte(`{"api":true}`))
})

func mustHandler(tb testing.TB, cfg Config) http.Handler {
	tb.Helper()
	h, err := Handler(apiStub, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func get(h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestPickLang(t *testing.T) {
	for _, tt := range []struct{ accept, want string }{
		{"", "en"},
		{"en-US,en;q=0.9", "en"},
		{"zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"},
		{"zh", "zh-CN"},
		{"zh-Hans", "zh-CN"},
		{"zh-TW", "zh-CN"}, // the nearest we have
		{"fr-FR", "en"},
		{"en;q=0.5,zh;q=0.9", "zh-CN"},
		{"*", "en"},
		{";;;,,,q=", "en"},
		{"zh;q=abc", "en"},
		{strings.Repeat("zh-CN,", 200), "en"}, // too long to be a preference
	} {
		if got := pickLang(tt.accept); got != tt.want {
			t.Errorf("pickLang(%q) = %q, want %q", tt.accept, got, tt.want)
		}
	}
}

func FuzzPickLang(f *testing.F) {
	for _, s := range []string{"", "zh-CN,zh;q=0.9", "en;q=0.1", "*;q=0", "x-" + strings.Repeat("a", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		if got := pickLang(accept); got != "en" && got != "zh-CN" {
			t.Fatalf("pickLang(%q) = %q", accept, got)
		}
	})
}

// TestRoutes: the pages answer their paths; everything else, the API's
// paths first of all, reaches the API untouched.
func TestRoutes(t *testing.T) {
	h := mustHandler(t, Config{})
	for _, tt := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/", 200, "text/html; charset=utf-8"},
		{"/sales/01ABC", 200, "text/html; charset=utf-8"},
		{"/console", 200, "text/html; charset=utf-8"},
		{"/admin", 200, "text/html; charset=utf-8"},
		{"/admin/x", http.StatusTeapot, "application/json"},
		{"/assets/style.css", 200, "text/css; charset=utf-8"},
		{"/assets/sale.js", 200, "text/javascript; charset=utf-8"},
		{"/assets/solve.mjs", 200, "text/javascript; charset=utf-8"},
		{"/assets/nope.js", 404, ""},
		{"/sales/" + strings.Repeat("x", maxIDLen+1), 404, ""},
		{"/api/sales", http.StatusTeapot, "application/json"},
		{"/api/sales/s1/events", http.StatusTeapot, "application/json"},
		{"/healthz", http.StatusTeapot, "application/json"},
		{"/sales", http.StatusTeapot, "application/json"},
		{"/sales/a/b", http.StatusTeapot, "application/json"},
		{"/index.html", http.StatusTeapot, "application/json"},
	} {
		w := get(h, tt.path)
		if w.Code != tt.status || tt.ctype != "" && w.Header().Get("Content-Type") != tt.ctype {
			t.Errorf("GET %s: %d %q, want %d %q", tt.path, w.Code, w.Header().Get("Content-Type"), tt.status, tt.ctype)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTeapot {
		t.Errorf("POST / went to the pages: %d", w.Code)
	}
}

// TestPageLanguage: the server renders the language Accept-Language asks
// for, says it varies on it, and the two versions have their own ETags.
func TestPageLanguage(t *testing.T) {
	h := mustHandler(t, Config{})
	en, zh := get(h, "/sales/s1"), get(h, "/sales/s1", "Accept-Language", "zh-CN,zh;q=0.9")
	if !bytes.Contains(en.Body.Bytes(), []byte(`<html lang="en">`)) || !bytes.Contains(zh.Body.Bytes(), []byte(`<html lang="zh-CN">`)) {
		t.Fatal("lang attribute not chosen from Accept-Language")
	}
	if en.Header().Get("Vary") != "Accept-Language" || en.Header().Get("ETag") == zh.Header().Get("ETag") {
		t.Fatalf("Vary %q, ETags %q and %q", en.Header().Get("Vary"), en.Header().Get("ETag"), zh.Header().Get("ETag"))
	}
}

// TestCaching: pages revalidate (304 on a matching ETag); an asset at its
// hashed URL is cached for a year, at any other URL revalidated.
func TestCaching(t *testing.T) {
	h := mustHandler(t, Config{})
	w := get(h, "/")
	if w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("page Cache-Control %q", w.Header().Get("Cache-Control"))
	}
	if w2 := get(h, "/", "If-None-Match", w.Header().Get("ETag")); w2.Code != http.StatusNotModified || w2.Body.Len() != 0 {
		t.Errorf("revalidation: %d with %d bytes", w2.Code, w2.Body.Len())
	}
	m := regexp.MustCompile(`/assets/list\.js\?v=([0-9a-f]+)`).FindSubmatch(w.Body.Bytes())
	if m == nil {
		t.Fatalf("no hashed list.js in %s", w.Body)
	}
	if got := get(h, string(m[0])).Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
		t.Errorf("hashed asset Cache-Control %q", got)
	}
	if got := get(h, "/assets/list.js?v=stale").Header().Get("Cache-Control"); got != "no-cache" {
		t.Errorf("stale hash Cache-Control %q", got)
	}
	if got := get(h, "/").Header().Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") {
		t.Errorf("CSP %q", got)
	}
	// The console may not be framed by anyone (it acts with an operator's
	// token); the sale page may, the platform embeds it.
	for _, path := range []string{"/console", "/admin"} {
		hd := get(h, path).Header()
		if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || hd.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: CSP %q, X-Frame-Options %q: framable", path, csp, hd.Get("X-Frame-Options"))
		}
	}
	// The sale page: by this origin's pages only, unless origins are
	// configured (issue 23: any site could frame it and hand it a token).
	if hd := get(h, "/sales/s1").Header(); !strings.Contains(hd.Get("Content-Security-Policy"), "frame-ancestors 'self'") || hd.Get("X-Frame-Options") != "SAMEORIGIN" {
		t.Errorf("sale page CSP %q, X-Frame-Options %q: want this origin only", hd.Get("Content-Security-Policy"), hd.Get("X-Frame-Options"))
	}
	framed := mustHandler(t, Config{FrameOrigins: []string{"https://www.hotel.example", "https://app.ota.example:8443"}})
	w = get(framed, "/sales/s1")
	if csp := w.Header().Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; frame-ancestors 'self' https://www.hotel.example https://app.ota.example:8443") || w.Header().Get("X-Frame-Options") != "" {
		t.Errorf("sale page with frame origins: CSP %q, X-Frame-Options %q", csp, w.Header().Get("X-Frame-Options"))
	}
	if !strings.Contains(w.Body.String(), `data-frame-origins="https://www.hotel.example https://app.ota.example:8443"`) {
		t.Error("the page is not told which parents may hand it a token")
	}
}

// TestDemoFlag: the sale page knows demo mode from the server, not the URL.
func TestDemoFlag(t *testing.T) {
	for _, demo := range []bool{false, true} {
		body := get(mustHandler(t, Config{Demo: demo}), "/sales/s1").Body.String()
		want := `data-demo="false"`
		if demo {
			want = `data-demo="true"`
		}
		if !strings.Contains(body, want) {
			t.Errorf("demo=%v: no %s", demo, want)
		}
	}
}

// TestSolverIsTheReference: the page's solver is docs/pow/solve.mjs, the
// one bench.mjs checks against node's SHA-256 (go:embed cannot reach it).
func TestSolverIsTheReference(t *testing.T) {
	ref, err := os.ReadFile("../docs/pow/solve.mjs")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := static.ReadFile("static/solve.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ref, ours) {
		t.Fatal("web/static/solve.mjs differs from docs/pow/solve.mjs: copy it over")
	}
}

// FuzzPages: any path and Accept-Language answer without a 5xx, and a
// page never echoes the path (it is static; the script reads the ID).
func FuzzPages(f *testing.F) {
	h := mustHandler(f, Config{Demo: true})
	for _, s := range []string{"s1", "<script>", "%3Cscript%3E", "../console", "a/b", ""} {
		f.Add(s, "zh-CN")
	}
	f.Fuzz(func(t *testing.T, id, accept string) {
		if !utf8.ValidString(accept) || strings.ContainsAny(accept, "\r\n\x00") {
			return
		}
		r, err := http.NewRequest("GET", "http://x/sales/"+id, nil)
		if err != nil {
			return
		}
		r.Header.Set("Accept-Language", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%q: %d", id, w.Code)
		}
		if w.Code == 200 && len(id) > 3 && strings.Contains(w.Body.String(), id) && !strings.Contains(string(pagesBody(h)), id) {
			t.Fatalf("page echoes %q", id)
		}
	})
}

// pagesBody is the sale page as served for a plain ID.
func pagesBody(h http.Handler) []byte { return get(h, "/sales/plain").Body.Bytes() }

// TestPageDetails (issue 23, item 9): every page names an icon (the
// browser's own request for /favicon.ico was a 404 and a log line per
// page view), and the console's create form offers the API's default
// payment window (it offered 300 s where the API's default is 30 s).
func TestPageDetails(t *testing.T) {
	h := mustHandler(t, Config{})
	for _, path := range []string{"/", "/sales/s1", "/console"} {
		if body := get(h, path).Body.String(); !strings.Contains(body, `<link rel="icon"`) {
			t.Errorf("%s names no icon", path)
		}
	}
	want := fmt.Sprintf(`id="f-hold_seconds" name="hold_seconds" type="number" min="1" max="86400" step="1" value="%d"`, flashsale.HoldSecondsDefault)
	if body := get(h, "/console").Body.String(); !strings.Contains(body, want) {
		t.Errorf("the create form's payment window is not the API's default, %d s", flashsale.HoldSecondsDefault)
	}
}

// TestMetricFamilies (issue 22, item 7): the console page carries the
// metric families it reads from /metrics, rendered from package family
// (whose names metrics' TestFamilies checks the registry exports); every
// family promtext.js reads is one the page carries, and no page or script
// spells a metric name of its own.
func TestMetricFamilies(t *testing.T) {
	body := get(mustHandler(t, Config{}), "/console").Body.Bytes()
	m := regexp.MustCompile(`<script type="application/json" id="metric-families">(.*?)</script>`).FindSubmatch(body)
	if m == nil {
		t.Fatal("the console page carries no #metric-families")
	}
	var got map[string]string
	if err := json.Unmarshal(m[1], &got); err != nil {
		t.Fatalf("#metric-families %s: %v", m[1], err)
	}
	if diff := cmp.Diff(metricFamilies, got); diff != "" {
		t.Errorf("#metric-families (-want +got):\n%s", diff)
	}
	for key, name := range got {
		if !slices.Contains(family.All, name) {
			t.Errorf("#metric-families: %s is %s, which is not in family.All (so no test checks the registry exports it)", key, name)
		}
	}
	js, err := static.ReadFile("static/promtext.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range regexp.MustCompile(`families\.([a-zA-Z_]+)`).FindAllSubmatch(js, -1) {
		if _, ok := got[string(k[1])]; !ok {
			t.Errorf("promtext.js reads families.%s, which the page does not carry", k[1])
		}
	}
	spelled := regexp.MustCompile(family.Namespace + `_[a-z_]+|process_start_time_seconds`)
	files, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := static.ReadFile("static/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if s := spelled.Find(b); s != nil {
			t.Errorf("%s spells the metric name %s: read it from #metric-families", f.Name(), s)
		}
	}
}
