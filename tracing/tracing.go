// Package tracing is flashsale's OpenTelemetry tracing: one purchase's
// trace runs from the HTTP request through the stock engine and the queue
// publish to the consumer's database write.
//
// It is on only when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and then exports over OTLP
// HTTP. Off, Open returns a nil *Tracing whose methods hand back what they
// are given: no middleware, no wrapper, no span work on any path, so the
// sold-out answer stays allocation-free.
//
// Spans of the store, the stock engine and Redis are children only: a call
// whose context carries no span (the reaper, the audit, the heal loop, the
// readiness probe) starts none, so a trace is always a request's or an
// order's, never a background tick's.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// ServiceNameDefault is service.name unless OTEL_SERVICE_NAME says otherwise.
const ServiceNameDefault = "flashsale"

// scope names the spans this package makes (the store, the engine,
// Redis); otelhttp and the amqp package name their own.
const scope = "github.com/flashsale/flashsale/tracing"

// shutdownTimeout bounds the flush of the spans still queued at Close.
const shutdownTimeout = 5 * time.Second

// Config says whether spans are exported and as what service. The OTLP
// exporter and the SDK read the other standard variables themselves
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE,
// OTEL_TRACES_SAMPLER and its _ARG, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES).
type Config struct {
	// Endpoint is the URL spans are posted to:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else
	// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended, as the
	// specification says. Empty means tracing is off.
	Endpoint string
	// ServiceName is OTEL_SERVICE_NAME, ServiceNameDefault when unset.
	ServiceName string
	// Exporter, when set, replaces the OTLP exporter and turns tracing
	// on; it receives each span as the span ends (no batching), which is
	// what a test's tracetest.InMemoryExporter wants.
	Exporter sdktrace.SpanExporter
}

// FromEnv reads the standard variables: tracing is on when an OTLP
// endpoint is named, unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn it off.
func FromEnv(getenv func(string) string) Config {
	c := Config{
		Endpoint:    getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
		ServiceName: cmp.Or(getenv("OTEL_SERVICE_NAME"), ServiceNameDefault),
	}
	if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); c.Endpoint == "" && base != "" {
		c.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		c.Endpoint = ""
	}
	return c
}

// Enabled reports whether Open will trace.
func (c Config) Enabled() bool { return c.Endpoint != "" || c.Exporter != nil }

// LogValue is what the start-up line shows: no headers, which may carry
// the collector's credentials.
func (c Config) LogValue() slog.Value {
	if !c.Enabled() {
		return slog.StringValue("off")
	}
	return slog.GroupValue(slog.String("endpoint", c.Endpoint), slog.String("service", c.ServiceName))
}

// Tracing makes the spans. A nil *Tracing is tracing off: every method
// returns what it was given (or nil), so callers wire it unconditionally.
type Tracing struct {
	log      *slog.Logger
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// Open starts the tracer provider cfg asks for, or returns nil when
// tracing is off. Export failures go to logger (at warn), not to stderr on
// their own. It sets no global: everything here is handed its provider.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Tracing, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	exp := cfg.Exporter
	sync := exp != nil
	if exp == nil {
		if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) must be an http:// or https:// URL, such as http://otel-collector:4318; got %q", cfg.Endpoint)
		}
		// The URL is the one Config names (the exporter would read the
		// same variables); the rest of OTEL_EXPORTER_OTLP_* (headers,
		// timeout, compression, certificates) it reads itself. It
		// connects lazily.
		var err error
		if exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint)); err != nil {
			return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(cmp.Or(cfg.ServiceName, ServiceNameDefault)),
			semconv.ServiceVersion(flashsale.Version)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The SDK reports export failures through the process-wide handler;
	// send them to the one log stream instead of a bare line on stderr.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: export failed", "err", err)
	}))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if sync {
		opts = append(opts, sdktrace.WithSyncer(exp))
	} else {
		opts = append(opts, sdktrace.WithBatcher(exp)) // OTEL_BSP_* size it
	}
	// The sampler is the SDK's default, or OTEL_TRACES_SAMPLER's.
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{log: logger, provider: tp, tracer: tp.Tracer(scope, trace.WithInstrumentationVersion(flashsale.Version)),
		prop: propagation.TraceContext{}}, nil
}

// Close exports what is queued and stops the provider. Close it after
// everything that makes spans (the HTTP server, the consumer). Spans that
// cannot be exported (the collector is down) are a warn line, not an
// error: a shutdown that drained every order did not fail.
func (t *Tracing) Close() error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		t.log.Warn("tracing: spans lost at shutdown", "err", err)
	}
	return nil
}

// Provider is the tracer provider for the packages that name their own
// spans (the amqp publisher and consumer); nil when off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Propagator carries a trace context across a process boundary (W3C
// traceparent and tracestate); nil when off. Baggage is not carried: what a
// client sends in it would ride every queue message.
func (t *Tracing) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return nil
	}
	return t.prop
}

// Handler puts h behind otelhttp: a server span per request, continuing
// the caller's trace when it sends a traceparent. Probes, /metrics and the
// sales' event streams (a stream lasts as long as its guest watches) are
// not traced. Off, it returns h itself.
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return &handler{next: otelhttp.NewHandler(h, "http",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(t.prop),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), // the metrics are Prometheus's
		otelhttp.WithFilter(traced),
		otelhttp.WithSpanNameFormatter(spanName),
	)}
}

// spanName is "METHOD /pattern" for the pages, whose mux is the outer one
// and sets the pattern otelhttp sees. An API request matched only the
// pages' catch-all "/" there (its route is the API's own mux's, on a copy
// of the request otelhttp never sees), so its span is named by the method
// alone, as the semantic conventions say when no route is known;
// url.path says which request it was.
// A method not in the standard set is "HTTP": a client's made-up method
// must not name spans.
func spanName(_ string, r *http.Request) string {
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
	default:
		method = "HTTP"
	}
	if r.Pattern == "" || r.Pattern == "/" {
		return method
	}
	if _, route, ok := strings.Cut(r.Pattern, " "); ok {
		return method + " " + route
	}
	return method + " " + r.Pattern
}

// handler is otelhttp's middleware under a type of this package, so a
// test can tell it is installed.
type handler struct{ next http.Handler }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.next.ServeHTTP(w, r) }

// traced reports whether a request gets a span.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return !strings.HasSuffix(r.URL.Path, "/events")
}

// calls names the spans of one dependency's calls, "<system> <op>", and
// gives each the system's attributes and the operation's name.
type calls struct {
	t      *Tracing
	system string
	kind   trace.SpanKind
	attrs  []attribute.KeyValue // the system's, on every span
}

func (c *calls) span(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return c.t.start(ctx, c.system+" "+op, c.kind, append(append(attrs, c.attrs...), semconv.DBOperationName(op))...)
}

// call runs f, a call returning a value, in its span.
func call[T any](c *calls, ctx context.Context, op string, f func(context.Context) (T, error), attrs ...attribute.KeyValue) (T, error) {
	ctx, span := c.span(ctx, op, attrs...)
	v, err := f(ctx)
	end(span, err)
	return v, err
}

// run runs f, a call returning only an error, in its span.
func run(c *calls, ctx context.Context, op string, f func(context.Context) error, attrs ...attribute.KeyValue) error {
	ctx, span := c.span(ctx, op, attrs...)
	err := f(ctx)
	end(span, err)
	return err
}

// codeKey is the flashsale error code of a call that answered no.
var codeKey = attribute.Key("flashsale.error.code")

// start begins a child of the span ctx carries, or nothing (nil) when it
// carries none.
func (t *Tracing) start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// end ends span (nil: none was started). An answer such as sold_out or
// not_found is the call working: it is an attribute, and only a
// dependency that did not answer, or an internal error, marks the span
// failed.
func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		code := flashsale.ErrorCode(err)
		span.SetAttributes(codeKey.String(code))
		if code == flashsale.EInternal || flashsale.Unreachable(err) || errors.Is(err, context.Canceled) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
