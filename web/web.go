// Package web serves the pages people look at: the guest sale pages and
// the operator console. They are static files embedded in the binary (no
// npm, no CDN: they work offline) that speak the JSON API from the
// browser; this package holds no business rules and calls no service.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"golang.org/x/text/language"

	"github.com/flashsale/flashsale/metrics/family"
)

//go:embed static
var static embed.FS

// Config configures the pages.
type Config struct {
	// Demo makes the sale page sign in through POST /api/demo/login.
	Demo bool
	// FrameOrigins are the origins (https://www.hotel.example) whose
	// pages may frame the sale page and hand it the guest's token by
	// postMessage. None: only this origin's pages may.
	FrameOrigins []string
}

// metricFamilies are the metric families the console reads from /metrics
// while its dashboard's stream is down, by the keys console.js uses. The
// console page carries them (a JSON script element), rendered from package
// family, where the metrics package registers them: the JavaScript spells
// no metric name.
var metricFamilies = map[string]string{
	"process":   family.ProcessStart,
	"purchases": family.Purchases,
	"steps":     family.FunnelSteps,
	"latency":   family.RequestDuration,
}

// maxIDLen matches the API's bound on a sale ID.
const maxIDLen = 128

// Languages the pages speak; the first is the default.
var (
	langs   = []string{"en", "zh-CN"}
	matcher = language.NewMatcher([]language.Tag{language.English, language.SimplifiedChinese})
)

// pickLang chooses a page language from an Accept-Language header.
func pickLang(accept string) string {
	if len(accept) > 512 { // a header this long is nobody's preference list
		return langs[0]
	}
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return langs[0]
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return langs[0]
	}
	return langs[i]
}

// asset is one embedded file with its validators.
type asset struct {
	body  []byte
	ctype string
	etag  string
	hash  string // what ?v= must be for the immutable cache
}

func newAsset(name string, body []byte) *asset {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:8])
	ct := mime.TypeByExtension(path.Ext(name))
	if path.Ext(name) == ".mjs" || ct == "" && path.Ext(name) == ".js" {
		ct = "text/javascript; charset=utf-8"
	}
	return &asset{body: body, ctype: ct, etag: `"` + h + `"`, hash: h}
}

// pages holds each page rendered once per language at start: a page costs
// a map lookup, and its ETag lets a browser revalidate it for nothing.
type pages struct {
	assets map[string]*asset            // by file name
	pages  map[string]map[string]*asset // page name -> lang -> rendered
	// frameAncestors is the sale page's CSP frame-ancestors source list.
	frameAncestors string
}

// Handler serves the pages at GET /, /sales/{id} and /console (also at
// /admin) and their
// files under /assets/, and passes every other request to api, whose
// routes (everything under /api/, /healthz, /readyz, /metrics) keep
// priority.
func Handler(api http.Handler, cfg Config) (http.Handler, error) {
	p, err := load(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.HandleFunc("GET /{$}", p.page("index"))
	mux.HandleFunc("GET /sales/{id}", p.page("sale"))
	mux.HandleFunc("GET /console", p.page("console"))
	mux.HandleFunc("GET /admin", p.page("console")) // the name an operator may try first
	mux.HandleFunc("GET /assets/{name}", p.handleAsset)
	// The API's paths skip this mux: a second round of pattern matching
	// on every purchase cost the sold-out answer about 3% of its CPU.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}

// load reads the embedded files and renders the pages.
func load(cfg Config) (*pages, error) {
	p := &pages{assets: map[string]*asset{}, pages: map[string]map[string]*asset{},
		frameAncestors: strings.Join(append([]string{"'self'"}, cfg.FrameOrigins...), " ")}
	files, err := fs.ReadDir(static, "static")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".html") {
			continue
		}
		b, err := static.ReadFile("static/" + f.Name())
		if err != nil {
			return nil, err
		}
		p.assets[f.Name()] = newAsset(f.Name(), b)
	}
	funcs := template.FuncMap{
		// asset is a file's URL with its content hash, cached for a year.
		"asset": func(name string) (string, error) {
			a, ok := p.assets[name]
			if !ok {
				return "", fmt.Errorf("no asset %q", name)
			}
			return "/assets/" + name + "?v=" + a.hash, nil
		},
	}
	for _, name := range []string{"index", "sale", "console"} {
		t, err := template.New(name+".html").Funcs(funcs).ParseFS(static, "static/"+name+".html")
		if err != nil {
			return nil, err
		}
		p.pages[name] = map[string]*asset{}
		for _, lang := range langs {
			var b bytes.Buffer
			if err := t.Execute(&b, struct {
				Lang           string
				Demo           bool
				FrameOrigins   string
				MetricFamilies map[string]string
			}{lang, cfg.Demo, strings.Join(cfg.FrameOrigins, " "), metricFamilies}); err != nil {
				return nil, fmt.Errorf("web: render %s: %w", name, err)
			}
			p.pages[name][lang] = newAsset(name+".html", b.Bytes())
		}
	}
	return p, nil
}

// securityHeaders keep the pages from loading code from elsewhere; page
// adds who may frame each (the sale page: this origin and
// Config.FrameOrigins; the console: nobody).
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

func (p *pages) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); name == "sale" && len(id) > maxIDLen {
			http.NotFound(w, r)
			return
		}
		a := p.pages[name][pickLang(r.Header.Get("Accept-Language"))]
		h := w.Header()
		h.Set("Vary", "Accept-Language")
		h.Set("Cache-Control", "no-cache") // revalidate: new assets' hashes appear at once
		securityHeaders(h)
		switch name {
		case "console":
			// The console acts with an operator's token: no other page
			// may frame it and trick a click (clickjacking).
			h.Set("Content-Security-Policy", h.Get("Content-Security-Policy")+"; frame-ancestors 'none'")
			h.Set("X-Frame-Options", "DENY")
		case "sale":
			// The platform frames the sale page; nobody else may (a
			// stranger's page could trick a guest's click on Buy).
			h.Set("Content-Security-Policy", h.Get("Content-Security-Policy")+"; frame-ancestors "+p.frameAncestors)
			if p.frameAncestors == "'self'" {
				h.Set("X-Frame-Options", "SAMEORIGIN") // for browsers without CSP frame-ancestors
			}
		default:
			h.Set("Content-Security-Policy", h.Get("Content-Security-Policy")+"; frame-ancestors 'self'")
		}
		serve(w, r, a)
	}
}

func (p *pages) handleAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := p.assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	if r.URL.Query().Get("v") == a.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	securityHeaders(h)
	serve(w, r, a)
}

// serve answers with a, or 304 when the client has it.
func serve(w http.ResponseWriter, r *http.Request, a *asset) {
	h := w.Header()
	h.Set("ETag", a.etag)
	h.Set("Content-Type", a.ctype)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write(a.body)
}
