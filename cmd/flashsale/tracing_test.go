package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/tracing"
)

// runDistributed runs the distributed shape in-process (Redis on a prefix
// of its own, RabbitMQ on a queue name of its own, dbURL) with mod applied
// last.
func runDistributed(t *testing.T, dbURL string, mod func(*app.Config)) (*app.Main, *client, string) {
	t.Helper()
	prefix, queue := testenv.Name("fs-tr-")+":", testenv.Name("fs-trq-")
	m, c := MustRunMain(t, func(cfg *app.Config) {
		cfg.DatabaseURL = dbURL
		cfg.RedisURL, cfg.RedisPrefix = testenv.URL(t, testenv.Redis), prefix
		cfg.AMQPURL, cfg.QueueName = testenv.URL(t, testenv.AMQP), queue
		if mod != nil {
			mod(cfg)
		}
	})
	t.Cleanup(func() {
		testenv.DeleteKeys(testenv.URL(t, testenv.Redis), prefix)
		deleteTopology(testenv.URL(t, testenv.AMQP), queue)
	})
	return m, c, queue
}

// TestTracingAcrossQueue follows one purchase's trace through the
// distributed shape with the in-memory exporter: the HTTP server span
// continues the caller's traceparent; the Redis reserve and the publish
// are its children; the consumer's span continues the publish from the
// trace context the message's headers carried (another goroutine, the
// broker in between); the SQL write is the consumer span's child. One
// trace ID throughout, each parent link as said.
func TestTracingAcrossQueue(t *testing.T) {
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			_, c, queue := runDistributed(t, db(t), func(cfg *app.Config) {
				cfg.Tracing = tracing.Config{Exporter: exp, ServiceName: "flashsale-test"}
			})
			id := c.createSale(t, saleJSON([]int{5}, 1, false))

			// The caller's trace: the purchase must join it, not start one.
			callerTrace, callerSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			var o orderJSON
			status, err := c.do(context.Background(), "POST", "/api/sales/"+id+"/purchase", c.jwt("guest-1"), map[string]any{},
				map[string]string{"Idempotency-Key": "k1", "X-Request-ID": "req-trace-1", "traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}, &o)
			if err != nil || status != http.StatusAccepted {
				t.Fatalf("purchase: %d %v %+v", status, err, o.Error)
			}

			// Spans are looked for in the caller's trace: under load the
			// outbox relay may publish the order again (a trace of its own,
			// harmless to the order); the parent links below are the test.
			dbName := map[string]string{"mysql": "mysql", "postgres": "postgresql"}[name]
			inTrace := func(s tracetest.SpanStub) bool { return s.SpanContext.TraceID().String() == callerTrace }
			write := waitSpan(t, exp, func(s tracetest.SpanStub) bool {
				return inTrace(s) && s.Name == dbName+" place_orders" && hasAttr(s, "flashsale.order.id", o.OrderID)
			})
			spans := exp.GetSpans()
			server := findSpan(t, spans, func(s tracetest.SpanStub) bool {
				return s.SpanKind == trace.SpanKindServer && hasAttr(s, "url.path", "/api/sales/"+id+"/purchase")
			})
			if got := server.SpanContext.TraceID().String(); got != callerTrace {
				t.Fatalf("server span's trace %s, want the caller's %s", got, callerTrace)
			}
			reserve := findSpan(t, spans, func(s tracetest.SpanStub) bool { return inTrace(s) && s.Name == "redis reserve" })
			// The commands the reserve sent (its script and the order's
			// index, one pipeline), from the go-redis hook.
			command := findSpan(t, spans, func(s tracetest.SpanStub) bool {
				return inTrace(s) && strings.HasPrefix(s.Name, "redis ") && s.Parent.SpanID() == reserve.SpanContext.SpanID()
			})
			publish := findSpan(t, spans, func(s tracetest.SpanStub) bool { return inTrace(s) && s.Name == queue+".orders publish" })
			process := findSpan(t, spans, func(s tracetest.SpanStub) bool {
				return inTrace(s) && s.Name == queue+".orders process" && hasAttr(s, "flashsale.order.id", o.OrderID)
			})
			if got := server.Parent.SpanID().String(); got != callerSpan || !server.Parent.IsRemote() {
				t.Errorf("server span's parent %s (remote %v), want the caller's span %s", got, server.Parent.IsRemote(), callerSpan)
			}
			for _, link := range []struct {
				name          string
				child, parent tracetest.SpanStub
				kind          trace.SpanKind
			}{
				{"redis reserve", reserve, server, trace.SpanKindClient},
				{"redis command", command, reserve, trace.SpanKindClient},
				{"publish", publish, server, trace.SpanKindProducer},
				{"process", process, publish, trace.SpanKindConsumer},
				{"place_orders", write, process, trace.SpanKindClient},
			} {
				if got := link.child.SpanContext.TraceID().String(); got != callerTrace {
					t.Errorf("%s: trace %s, want %s", link.name, got, callerTrace)
				}
				if got, want := link.child.Parent.SpanID(), link.parent.SpanContext.SpanID(); got != want {
					t.Errorf("%s: parent %s, want %s (%s)", link.name, got, want, link.parent.Name)
				}
				if link.child.SpanKind != link.kind {
					t.Errorf("%s: kind %v, want %v", link.name, link.child.SpanKind, link.kind)
				}
			}
			for _, sp := range []tracetest.SpanStub{reserve, publish, process} {
				if !hasAttr(sp, "flashsale.request.id", "req-trace-1") {
					t.Errorf("%s: no flashsale.request.id=req-trace-1 (the log lines' id) in %v", sp.Name, sp.Attributes)
				}
			}
			if !process.Parent.IsRemote() {
				t.Error("the consumer's parent is not remote: the context did not come from the message")
			}
			if !hasAttr(process, "flashsale.order.result", "held") {
				t.Errorf("process span attributes %v, want flashsale.order.result=held", process.Attributes)
			}
			if !hasAttr(write, "db.system.name", dbName) {
				t.Errorf("place_orders attributes %v, want db.system.name=%s", write.Attributes, dbName)
			}
		})
	}
}

// TestTracingOff: with no OTLP endpoint nothing of tracing is installed in
// the distributed shape (no middleware, no store or engine wrapper, no
// provider handed to the queue); the same checks find each of them with it
// on, so the test cannot pass by looking in the wrong place.
func TestTracingOff(t *testing.T) {
	dbURL := testenv.MySQLDatabase(t)
	pkg := reflect.TypeFor[tracing.Tracing]().PkgPath()
	fromTracing := func(v any) bool {
		ty := reflect.TypeOf(v)
		if ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		return ty.PkgPath() == pkg
	}
	installed := func(m *app.Main) map[string]bool {
		return map[string]bool{
			"tracing": m.Tracing() != nil, "handler": fromTracing(m.Routes()), "store": fromTracing(m.Store().OrderStore),
			"engine": fromTracing(m.Engine().Reserver), "outbox": fromTracing(m.Engine().Outbox), "queue": m.Tracing().Provider() != nil,
		}
	}

	cfg, err := app.ParseConfig(nil, nil, func(string) string { return "" })
	if err != nil || cfg.Tracing.Enabled() {
		t.Fatalf("no OTEL_* variables: tracing enabled %v, err %v", cfg.Tracing.Enabled(), err)
	}
	off, _, _ := runDistributed(t, dbURL, nil)
	for what, on := range installed(off) {
		if on {
			t.Errorf("tracing off, yet the %s is traced", what)
		}
	}
	on, _, _ := runDistributed(t, dbURL, func(cfg *app.Config) {
		cfg.Tracing = tracing.Config{Exporter: tracetest.NewInMemoryExporter()}
	})
	for what, ok := range installed(on) {
		if !ok {
			t.Errorf("tracing on, yet the %s is not traced", what)
		}
	}
}

// TestTracingOTLP: the program as configured from the standard variables
// (embedded shape) exports a purchase's spans as OTLP/HTTP to the
// collector OTEL_EXPORTER_OTLP_ENDPOINT names, in batches
// (OTEL_BSP_SCHEDULE_DELAY shortened from 5 s, which the SDK reads).
func TestTracingOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
	}))
	defer collector.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_SERVICE_NAME": "flashsale-test"}
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	_, c := MustRunMain(t, func(cfg *app.Config) { cfg.Tracing = tracing.FromEnv(func(k string) string { return env[k] }) })
	id := c.createSale(t, saleJSON([]int{1}, 1, false))
	if status, _, err := c.purchase(context.Background(), id, "guest-1", false, nil, "k1"); err != nil || status != http.StatusAccepted {
		t.Fatalf("purchase: %d %v", status, err)
	}
	var first string
	if !testenv.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(got) > 0 {
			first = got[0]
		}
		return len(got) > 0
	}) {
		t.Fatal("nothing exported in 10 s")
	}
	if first != "POST /v1/traces" {
		t.Fatalf("the collector got %q, want POST /v1/traces", first)
	}
}

// BenchmarkSoldOutTracing is a sold-out purchase through the program's
// whole handler (embedded shape): tracing off, on with every trace
// sampled, and on sampling 1% (OTEL_TRACES_SAMPLER=traceidratio): what
// turning it on costs the hottest answer.
func BenchmarkSoldOutTracing(b *testing.B) {
	for _, tc := range []struct{ name, sampler string }{{"off", ""}, {"on", ""}, {"on-1%", "traceidratio"}} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.sampler != "" {
				b.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
				b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.01")
			}
			m, c := MustRunMain(b, func(cfg *app.Config) {
				if tc.name != "off" {
					cfg.Tracing = tracing.Config{Exporter: discard{}}
				}
			})
			id := c.createSale(b, saleJSON([]int{1}, 1, false))
			if status, _, err := c.purchase(context.Background(), id, "first", false, nil, ""); err != nil || status != http.StatusAccepted {
				b.Fatalf("first purchase: %d %v", status, err)
			}
			body := `{}`
			auth := "Bearer " + c.jwt("late")
			h := m.Handler()
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/sales/"+id+"/purchase", strings.NewReader(body))
				req.Header.Set("Authorization", auth)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusConflict {
					b.Fatalf("status %d, want 409 sold_out: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// discard is an exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// waitSpan polls the exporter until a span matches, for up to 15 s.
func waitSpan(t *testing.T, exp *tracetest.InMemoryExporter, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	if !testenv.Poll(15*time.Second, 20*time.Millisecond, func() bool {
		spans := exp.GetSpans()
		i := slices.IndexFunc(spans, match)
		if i >= 0 {
			found = spans[i]
		}
		return i >= 0
	}) {
		t.Fatalf("no such span after 15 s; have:\n%s", spanList(exp.GetSpans()))
	}
	return found
}

// findSpan returns the one span that matches.
func findSpan(t *testing.T, spans tracetest.SpanStubs, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d matching spans, want 1; have:\n%s", len(found), spanList(spans))
	}
	return found[0]
}

func hasAttr(s tracetest.SpanStub, key, value string) bool {
	for _, a := range s.Attributes {
		if a.Key == attribute.Key(key) && a.Value.String() == value {
			return true
		}
	}
	return false
}

func spanList(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s parent=%s kind=%v\n", s.SpanContext.SpanID(), s.Name, s.Parent.SpanID(), s.SpanKind)
	}
	return b.String()
}
