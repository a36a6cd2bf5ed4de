package amqp

import (
	"context"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// traceScope names the order path's spans.
const traceScope = "github.com/flashsale/flashsale/amqp"

// tracer makes the order path's spans and carries their context in the
// message headers. A nil *tracer is tracing off: its methods do nothing
// beyond what an untraced message needs.
type tracer struct {
	t    trace.Tracer
	prop propagation.TextMapPropagator
}

// newTracer is cfg's tracer, nil without a TracerProvider.
func newTracer(cfg Config) *tracer {
	if cfg.TracerProvider == nil {
		return nil
	}
	tr := &tracer{t: cfg.TracerProvider.Tracer(traceScope), prop: cfg.Propagator}
	if tr.prop == nil {
		tr.prop = propagation.TraceContext{}
	}
	return tr
}

// headers are a message's headers: the request id when ctx has one, and
// the trace context of ctx's span when tracing.
func (tr *tracer) headers(ctx context.Context) amqp091.Table {
	h := requestHeaders(ctx)
	if tr == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = amqp091.Table{}
	}
	tr.prop.Inject(ctx, headerCarrier(h))
	return h
}

// startPublish begins the producer span of one publish, a child of the
// purchase's span when ctx carries one (the relay's republish starts a
// trace of its own).
func (tr *tracer) startPublish(ctx context.Context, exchange string, r *flashsale.Reservation) (context.Context, trace.Span) {
	return tr.t.Start(ctx, exchange+" publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"), semconv.MessagingDestinationName(exchange),
			semconv.MessagingRabbitMQDestinationRoutingKey(routingKey), semconv.MessagingMessageID(r.OrderID),
			orderIDKey.String(r.OrderID), saleIDKey.String(r.SaleID), requestIDKey.String(flashsale.RequestID(ctx))))
}

// startProcess begins the consumer span of one delivery: a child of the
// publish span whose context its headers carry. It ends when the delivery
// is settled (see endProcess). Nil when tracing is off.
func (tr *tracer) startProcess(d *amqp091.Delivery, queue string, r *flashsale.Reservation) trace.Span {
	if tr == nil {
		return nil
	}
	ctx := tr.prop.Extract(context.Background(), headerCarrier(d.Headers))
	_, span := tr.t.Start(ctx, queue+" process", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(semconv.MessagingSystemRabbitMQ, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(queue),
			semconv.MessagingMessageID(d.MessageId), orderIDKey.String(r.OrderID), saleIDKey.String(r.SaleID),
			requestIDKey.String(deliveryRequestID(d.Headers)), attribute.Bool("messaging.rabbitmq.redelivered", d.Redelivered)))
	return span
}

// batchContext is the context a batch is written under: the first
// delivery's span, so the database write is its child; every other
// delivery of the batch links to that span ("written with"), since one
// transaction has one parent. Off, it is ctx itself.
func (tr *tracer) batchContext(ctx context.Context, batch []item) context.Context {
	if tr == nil || len(batch) == 0 {
		return ctx
	}
	first := batch[0].span
	first.SetAttributes(semconv.MessagingBatchMessageCount(len(batch)))
	for i := 1; i < len(batch); i++ {
		batch[i].span.AddLink(trace.Link{SpanContext: first.SpanContext()})
	}
	return trace.ContextWithSpan(ctx, first)
}

// itemContext is ctx under one delivery's span (what is done for that
// order alone, such as giving up on it).
func (tr *tracer) itemContext(ctx context.Context, it *item) context.Context {
	if tr == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, it.span)
}

// endProcess ends a settled delivery's span with what became of it.
func (tr *tracer) endProcess(it *item, v verdict, result, reason error) {
	if tr == nil {
		return
	}
	switch {
	case v == verdictAck && result == nil:
		it.span.SetAttributes(resultKey.String("held"))
	case v == verdictAck:
		it.span.SetAttributes(resultKey.String(flashsale.ErrorCode(result)))
	case v == verdictRequeue:
		it.span.SetAttributes(resultKey.String("requeued"))
		it.span.SetStatus(codes.Error, reason.Error())
	default:
		it.span.SetAttributes(resultKey.String("dead_lettered"))
		it.span.SetStatus(codes.Error, reason.Error())
	}
	it.span.End()
}

// endPublish ends a publish span: any error is the order path failing.
func endPublish(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// The attributes that name the order a span is about (and the request
// id its log lines carry), and its result.
var (
	orderIDKey   = attribute.Key("flashsale.order.id")
	saleIDKey    = attribute.Key("flashsale.sale.id")
	requestIDKey = attribute.Key("flashsale.request.id")
	resultKey    = attribute.Key("flashsale.order.result")
)

// headerCarrier lets a propagator read and write a message's headers;
// the trace context is string-valued (traceparent, tracestate).
type headerCarrier amqp091.Table

func (c headerCarrier) Get(key string) string {
	v, _ := c[key].(string)
	return v
}

func (c headerCarrier) Set(key, value string) { c[key] = value }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
