package amqp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// rawHeaders publishes r under a request span and reads the message back
// off the queue as it was stored, without a consumer.
func rawHeaders(t *testing.T, cfg Config, tp trace.TracerProvider) (amqp091.Table, trace.SpanContext) {
	t.Helper()
	p := MustPublisher(t, cfg)
	ctx, span := tp.Tracer("test").Start(flashsale.WithRequestID(t.Context(), "req-1"), "request")
	if _, err := p.Write(ctx, reservation("sale-h", 1)); err != nil {
		t.Fatal(err)
	}
	span.End()
	var d amqp091.Delivery
	withChannel(t, cfg.withDefaults(), func(ch *amqp091.Channel) error {
		var ok bool
		var err error
		d, ok, err = ch.Get(cfg.withDefaults().queue(), true)
		if err == nil && !ok {
			err = fmt.Errorf("the queue is empty")
		}
		return err
	})
	return d.Headers, span.SpanContext()
}

// TestTraceHeaders: traced, a message carries its publish span's W3C
// traceparent beside the request id; untraced (no TracerProvider), the
// same publish under the same request span carries the request id alone.
func TestTraceHeaders(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))

	cfg := MustConfig(t)
	cfg.TracerProvider = tp
	h, request := rawHeaders(t, cfg, tp)
	var publish tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindProducer {
			publish = s
		}
	}
	if publish.Parent.SpanID() != request.SpanID() {
		t.Fatalf("publish span's parent %s, want the request's %s", publish.Parent.SpanID(), request.SpanID())
	}
	want := fmt.Sprintf("00-%s-%s-01", request.TraceID(), publish.SpanContext.SpanID())
	if got := h["traceparent"]; got != want || h[requestIDHeader] != "req-1" {
		t.Errorf("traced headers %v, want traceparent %s and the request id", h, want)
	}

	h, _ = rawHeaders(t, MustConfig(t), tp)
	_, parent := h["traceparent"]
	_, state := h["tracestate"]
	if parent || state || h[requestIDHeader] != "req-1" {
		t.Errorf("untraced headers %v, want the request id and no trace context", h)
	}
}

// spanStore records the span each batch is written under.
type spanStore struct {
	*memStore
	mu      sync.Mutex
	batches []spanBatch
}

type spanBatch struct {
	under  trace.SpanContext
	orders []string
}

func (s *spanStore) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	b := spanBatch{under: trace.SpanContextFromContext(ctx)}
	for _, r := range rs {
		b.orders = append(b.orders, r.OrderID)
	}
	s.mu.Lock()
	s.batches = append(s.batches, b)
	s.mu.Unlock()
	return s.memStore.PlaceOrders(ctx, rs)
}

// TestTraceAcrossQueue: each order's consumer span continues its publish
// span's trace; a batch is written under its first order's consumer span,
// and the batch's other orders link to that span.
func TestTraceAcrossQueue(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg := MustConfig(t)
	cfg.TracerProvider = tp
	p := MustPublisher(t, cfg)
	const n = 12
	for i := range n { // queued before the consumer starts: they come in batches
		ctx, span := tp.Tracer("test").Start(t.Context(), "request")
		if _, err := p.Write(ctx, reservation("sale-t", i)); err != nil {
			t.Fatal(err)
		}
		span.End()
	}
	store := &spanStore{memStore: newMemStore()}
	StartConsumer(t, cfg, store)
	checkFor(t, 10*time.Second, "every order written and its span ended", func() bool {
		processed := 0
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindConsumer {
				processed++
			}
		}
		return store.count() == n && processed == n
	})

	publish, process := map[string]tracetest.SpanStub{}, map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == orderIDKey {
				switch s.SpanKind {
				case trace.SpanKindProducer:
					publish[a.Value.AsString()] = s
				case trace.SpanKindConsumer:
					process[a.Value.AsString()] = s
				}
			}
		}
	}
	for id, c := range process {
		pub := publish[id]
		if c.SpanContext.TraceID() != pub.SpanContext.TraceID() || c.Parent.SpanID() != pub.SpanContext.SpanID() || !c.Parent.IsRemote() {
			t.Errorf("%s: consumer span in trace %s under %s, want a remote child of its publish %s/%s",
				id, c.SpanContext.TraceID(), c.Parent.SpanID(), pub.SpanContext.TraceID(), pub.SpanContext.SpanID())
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	multi := false
	for _, b := range store.batches {
		first := process[b.orders[0]]
		if b.under.SpanID() != first.SpanContext.SpanID() {
			t.Errorf("batch %v written under %s, want its first order's consumer span %s", b.orders, b.under.SpanID(), first.SpanContext.SpanID())
		}
		for _, id := range b.orders[1:] {
			multi = true
			if l := process[id].Links; len(l) != 1 || l[0].SpanContext.SpanID() != first.SpanContext.SpanID() {
				t.Errorf("%s: links %v, want one to %s", id, l, first.SpanContext.SpanID())
			}
		}
	}
	if !multi {
		t.Errorf("batches %v: none with more than one order, so the links went untested", store.batches)
	}
}
