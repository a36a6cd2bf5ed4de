package tracing_test

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/storetest"
	"github.com/flashsale/flashsale/tracing"
)

// MustOpen returns tracing on, exporting to an in-memory exporter.
func MustOpen(tb testing.TB) (*tracing.Tracing, *tracetest.InMemoryExporter) {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.Open(tb.Context(), tracing.Config{Exporter: exp}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	return tr, exp
}

// parent is a context under a root span of tr's provider: what a request's
// context carries.
func parent(tb testing.TB, tr *tracing.Tracing) (context.Context, trace.Span) {
	tb.Helper()
	ctx, span := tr.Provider().Tracer("test").Start(tb.Context(), "request")
	tb.Cleanup(func() { span.End() })
	return ctx, span
}

func mustOpenSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	return storetest.MustOpen(tb, sqlite.Open, filepath.Join(tb.TempDir(), "flashsale.db"))
}

func newSale(stock int) *flashsale.Sale {
	now := time.Now()
	return fixture.Sale(fixture.ID("sale-"+strings.ToLower(rand.Text()[:8])), fixture.Stock(stock), fixture.Price(100, 200),
		fixture.Window(now.Add(-time.Hour), now.Add(time.Hour)), fixture.Hold(60), fixture.Created(now))
}

func attr(s tracetest.SpanStub, key string) (string, bool) {
	for _, a := range s.Attributes {
		if a.Key == attribute.Key(key) {
			return a.Value.String(), true
		}
	}
	return "", false
}

// checkChildren checks spans are named want, in order, each of kind
// and a child of the request's span.
func checkChildren(tb testing.TB, spans tracetest.SpanStubs, want string, req trace.Span, kind trace.SpanKind) {
	tb.Helper()
	if got := strings.Join(names(spans), ","); got != want {
		tb.Fatalf("spans %s, want %s", got, want)
	}
	for _, sp := range spans {
		if sp.Parent.SpanID() != req.SpanContext().SpanID() || sp.SpanKind != kind {
			tb.Errorf("%s: parent %s kind %v, want the request's span and %v", sp.Name, sp.Parent.SpanID(), sp.SpanKind, kind)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestOff: tracing off is a nil *Tracing that hands back what it is given
// and installs nothing.
func TestOff(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"},
	} {
		cfg := tracing.FromEnv(func(k string) string { return env[k] })
		tr, err := tracing.Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil || tr != nil {
			t.Fatalf("%v: Open = %v, %v; want nil, nil", env, tr, err)
		}
	}
	var tr *tracing.Tracing
	store := mustOpenSQLite(t)
	engine := inmem.NewEngine()
	h := http.NewServeMux()
	w := inmem.NewWriter(store, inmem.WriterConfig{}, slog.New(slog.DiscardHandler))
	defer w.Close()
	switch {
	case tr.Store(store.Roles(), "sqlite") != store.Roles():
		t.Error("Store wrapped")
	case tr.Engine(engine.Roles(), "inmem") != flashsale.StockEngine(engine.Roles()):
		t.Error("Engine wrapped")
	case tr.Writer(w) != flashsale.OrderWriter(w):
		t.Error("Writer wrapped")
	case tr.RedisHook() != nil, tr.Provider() != nil, tr.Propagator() != nil:
		t.Error("a hook, provider or propagator to install")
	case tr.Close() != nil:
		t.Error("Close failed")
	}
	if tr.Handler(h) != http.Handler(h) {
		t.Error("Handler wrapped")
	}
}

// TestStore: a store call under a request's span is its child, named and
// attributed for the database; a call with no span in its context (a
// background loop's) makes none; a refusal is an attribute, not a failure,
// and a store that cannot answer marks the span failed.
func TestStore(t *testing.T) {
	tr, exp := MustOpen(t)
	s := tr.Store(mustOpenSQLite(t).Roles(), "sqlite")
	sale := newSale(2)
	if err := s.CreateSale(t.Context(), sale); err != nil { // no span: none made
		t.Fatal(err)
	}
	if got := exp.GetSpans(); len(got) != 0 {
		t.Fatalf("background call made spans %v", names(got))
	}
	ctx, req := parent(t, tr)
	if _, err := s.Sale(ctx, sale.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Order(ctx, "no-such-order"); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatalf("Order = %v, want ErrNotFound", err)
	}
	rs := []flashsale.Reservation{{OrderID: "o1", SaleID: sale.ID, UserID: "u1", Nights: 1, Rooms: 1, Amount: 100,
		HoldExpiresAt: time.Now().Add(time.Minute), Active: true}}
	if _, err := s.PlaceOrders(ctx, rs); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	checkChildren(t, spans, "sqlite sale,sqlite order,sqlite place_orders", req, trace.SpanKindClient)
	for _, sp := range spans {
		if v, _ := attr(sp, "db.system.name"); v != "sqlite" {
			t.Errorf("%s: db.system.name %q", sp.Name, v)
		}
	}
	if v, _ := attr(spans[1], "flashsale.error.code"); v != flashsale.ENotFound || spans[1].Status.Code == codes.Error {
		t.Errorf("not found: code %q status %v, want not_found and no error", v, spans[1].Status)
	}
	if v, _ := attr(spans[2], "flashsale.orders.held"); v != "1" {
		t.Errorf("place_orders held %q, want 1", v)
	}
	if v, _ := attr(spans[2], "db.operation.batch.size"); v != "1" {
		t.Errorf("place_orders batch size %q, want 1", v)
	}

	exp.Reset()
	closed := mustOpenSQLite(t)
	closed.Close()
	if _, err := tr.Store(closed.Roles(), "sqlite").Sale(ctx, sale.ID); err == nil {
		t.Fatal("a closed store answered")
	}
	if spans := exp.GetSpans(); len(spans) != 1 || spans[0].Status.Code != codes.Error {
		t.Fatalf("closed store: spans %+v, want one failed", spans)
	}
}

// TestEngine: engine calls under a span are its children; SoldOut goes
// straight through, without a span or an allocation; an engine without
// an outbox still has none.
func TestEngine(t *testing.T) {
	tr, exp := MustOpen(t)
	store := mustOpenSQLite(t)
	sale := newSale(1)
	if err := store.CreateSale(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	snap, err := store.Snapshot(t.Context(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	e := tr.Engine(inmem.NewEngine().Roles(), "inmem")
	if e.Outbox != nil {
		t.Fatal("an outbox the engine does not keep")
	}
	ctx, req := parent(t, tr)
	if err := e.Load(ctx, snap, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := func(id string) *flashsale.Reservation {
		return &flashsale.Reservation{OrderID: id, SaleID: sale.ID, UserID: id, Nights: 1, Rooms: 1, Active: true}
	}
	if _, err := e.Reserve(ctx, r("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reserve(ctx, r("b")); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("second reserve = %v, want ErrSoldOut", err)
	}
	spans := exp.GetSpans()
	checkChildren(t, spans, "inmem load,inmem reserve,inmem reserve", req, trace.SpanKindInternal)
	if v, _ := attr(spans[2], "flashsale.error.code"); v != flashsale.ESoldOut || spans[2].Status.Code == codes.Error {
		t.Errorf("sold out: code %q status %v, want sold_out, not an error", v, spans[2].Status)
	}
	exp.Reset()
	if allocs := testing.AllocsPerRun(1000, func() {
		if !e.SoldOut(sale.ID, 0, 1) {
			t.Fatal("not sold out")
		}
	}); allocs != 0 {
		t.Errorf("SoldOut through the wrapper: %v allocs, want 0", allocs)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("SoldOut made spans %v", names(spans))
	}
}

// TestRedisHook: a command sent under a span is its child client span,
// named by the command and never carrying its arguments; redis.Nil is an
// answer; a command with no span in its context makes none.
func TestRedisHook(t *testing.T) {
	opt, err := goredis.ParseURL(testenv.URL(t, testenv.Redis))
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	tr, exp := MustOpen(t)
	client.AddHook(tr.RedisHook())
	key := testenv.Name("fs-trace-") + ":k"
	t.Cleanup(func() { client.Del(context.Background(), key) })

	// Untraced, they make the connections (go-redis keeps pipelines on a
	// pool of their own): the handshake of a connection made for a traced
	// call is spans of that call too.
	if err := client.Set(t.Context(), key, "secret-token", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Pipelined(t.Context(), func(p goredis.Pipeliner) error { return p.Get(t.Context(), key).Err() }); err != nil {
		t.Fatal(err)
	}
	if got := exp.GetSpans(); len(got) != 0 {
		t.Fatalf("a command without a span made %v", names(got))
	}
	ctx, req := parent(t, tr)
	if err := client.Get(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Get(ctx, key+":missing").Err(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("get missing = %v", err)
	}
	pipe := client.Pipeline()
	pipe.Get(ctx, key)
	pipe.TTL(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, "NOSUCHCOMMAND").Err(); err == nil {
		t.Fatal("an unknown command answered")
	}
	spans := exp.GetSpans()
	checkChildren(t, spans, "redis get,redis get,redis pipeline,redis nosuchcommand", req, trace.SpanKindClient)
	for i, sp := range spans {
		for _, a := range sp.Attributes {
			if strings.Contains(a.Value.String(), key) || strings.Contains(a.Value.String(), "secret") {
				t.Errorf("%s carries an argument: %s=%s", sp.Name, a.Key, a.Value.String())
			}
		}
		if failed := sp.Status.Code == codes.Error; failed != (i == 3) {
			t.Errorf("%s: status %v", sp.Name, sp.Status)
		}
	}
	if v, _ := attr(spans[2], "db.operation.batch.size"); v != "2" {
		t.Errorf("pipeline batch size %q, want 2", v)
	}
}

// pagesMux is the program's shape: the pages' mux in front, its catch-all
// "/" handing everything else to the API, which routes a copy of the
// request (it gives it a deadline) with a mux of its own.
func pagesMux() http.Handler {
	routes := http.NewServeMux()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { routes.ServeHTTP(w, r.WithContext(r.Context())) })
	routes.HandleFunc("POST /api/sales/{id}/purchase", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	routes.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	routes.HandleFunc("GET /api/sales/{id}/events", func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.HandleFunc("GET /sales/{id}", func(w http.ResponseWriter, r *http.Request) {})
	return mux
}

// TestHandler: a server span per request, named by the pages' route or by
// the method alone for an API request (its route is not visible from
// outside the API's mux); probes and event streams untraced.
func TestHandler(t *testing.T) {
	tr, exp := MustOpen(t)
	h := tr.Handler(pagesMux())
	for _, tc := range []struct{ method, path, span string }{
		{"POST", "/api/sales/s1/purchase", "POST"},
		{"GET", "/sales/s1", "GET /sales/{id}"},
		{"GET", "/healthz", ""},
		{"GET", "/api/sales/s1/events", ""},
		{"BREW", "/api/sales/s1/purchase", "HTTP"},
	} {
		exp.Reset()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.path, nil))
		spans := exp.GetSpans()
		switch {
		case tc.span == "" && len(spans) != 0:
			t.Errorf("%s %s: traced as %v", tc.method, tc.path, names(spans))
		case tc.span != "" && (len(spans) != 1 || spans[0].Name != tc.span || spans[0].SpanKind != trace.SpanKindServer):
			t.Errorf("%s %s: spans %v, want one server span %q", tc.method, tc.path, names(spans), tc.span)
		}
	}
}

// traceparents are bad trace contexts a client may send: each must start
// a trace of our own, never be continued.
var traceparents = []string{
	"",
	"garbage",
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span
	"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // forbidden version
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", // upper case
	"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  // short trace
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",  // short flags
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
	"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0z",
	strings.Repeat("0", 10000),
}

// TestBadTraceparent: a malformed traceparent is ignored (a new trace),
// a well-formed one continued.
func TestBadTraceparent(t *testing.T) {
	tr, exp := MustOpen(t)
	h := tr.Handler(pagesMux())
	for _, tp := range traceparents {
		exp.Reset()
		if got := serveTraceparent(t, h, exp, tp); got.Parent.IsValid() {
			t.Errorf("traceparent %q continued as parent %s", tp, got.Parent.SpanID())
		}
	}
	exp.Reset()
	got := serveTraceparent(t, h, exp, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if got.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("a good traceparent not continued: trace %s parent %s", got.SpanContext.TraceID(), got.Parent.SpanID())
	}
}

func serveTraceparent(tb testing.TB, h http.Handler, exp *tracetest.InMemoryExporter, tp string) tracetest.SpanStub {
	tb.Helper()
	req := httptest.NewRequest("POST", "/api/sales/s1/purchase", nil)
	req.Header.Set("traceparent", tp)
	req.Header.Set("tracestate", tp)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		tb.Fatalf("traceparent %q: status %d", tp, w.Code)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		tb.Fatalf("traceparent %q: %d spans", tp, len(spans))
	}
	return spans[0]
}

// FuzzTraceparent: whatever a client sends as its trace context, the
// request is served and traced, continuing the client's trace only when
// its traceparent was valid.
func FuzzTraceparent(f *testing.F) {
	for _, tp := range traceparents {
		f.Add(tp, "")
	}
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=value,other=x")
	tr, exp := MustOpen(f)
	h := tr.Handler(pagesMux())
	f.Fuzz(func(t *testing.T, tp, state string) {
		exp.Reset()
		req := httptest.NewRequest("POST", "/api/sales/s1/purchase", nil)
		req.Header["Traceparent"] = []string{tp}
		req.Header["Tracestate"] = []string{state}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		spans := exp.GetSpans()
		// A valid traceparent whose caller did not sample (flags 00) is
		// followed: the parent-based sampler records nothing. Any other
		// header, valid and sampled or refused, makes one span.
		want := 1
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.HeaderCarrier(req.Header))); sc.IsValid() && !sc.IsSampled() {
			want = 0
		}
		if w.Code != http.StatusAccepted || len(spans) != want {
			t.Fatalf("status %d, %d spans, want %d", w.Code, len(spans), want)
		}
		if want == 0 {
			return
		}
		if s := spans[0]; s.Parent.IsValid() && !strings.Contains(tp, s.Parent.TraceID().String()) {
			t.Fatalf("parent trace %s is not the traceparent's %q", s.Parent.TraceID(), tp)
		}
	})
}

// TestBadEndpoint: an endpoint that is no http(s) URL is refused at start
// with a message naming the variable, not ignored for localhost:4318.
func TestBadEndpoint(t *testing.T) {
	for _, ep := range []string{"collector:4318", "grpc://collector:4317", "http//collector:4318", "://x", "ftp://collector"} {
		cfg := tracing.FromEnv(func(k string) string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}[k] })
		tr, err := tracing.Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if err == nil || tr != nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_ENDPOINT") {
			t.Errorf("%q: Open = %v, %v; want an error naming OTEL_EXPORTER_OTLP_ENDPOINT", ep, tr, err)
		}
	}
}

// TestOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans are sent as OTLP
// over HTTP to <endpoint>/v1/traces, flushed by Close; a collector that
// refuses is a warn line in the log, and Close still returns.
func TestOTLP(t *testing.T) {
	got := make(chan string, 16)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
		if r.Header.Get("X-Refuse") != "" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer collector.Close()
	for _, refuse := range []bool{false, true} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
		if refuse {
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-refuse=1")
		}
		var logs strings.Builder
		tr, err := tracing.Open(t.Context(), tracing.FromEnv(os.Getenv), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || tr == nil {
			t.Fatalf("Open = %v, %v", tr, err)
		}
		_, span := tr.Provider().Tracer("test").Start(t.Context(), "request")
		span.End()
		if err := tr.Close(); err != nil {
			t.Fatalf("Close: %v", err) // a refused export too: the shutdown did not fail
		}
		select {
		case req := <-got:
			if req != "POST /v1/traces application/x-protobuf" {
				t.Errorf("the collector got %q", req)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("nothing exported")
		}
		if refuse && !strings.Contains(logs.String(), "tracing: ") {
			t.Errorf("a refused export logged %q", logs.String())
		}
	}
}
