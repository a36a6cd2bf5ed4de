package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// Writer wraps the embedded shape's group-commit writer so a traced
// purchase shows its wait for the batch's transaction and fsync as a span
// ("group_commit write"). The transaction itself is shared by every
// purchase of the batch and runs on the writer's goroutine, under no
// purchase's span, so it is not traced; its batch sizes and fsync time are
// metrics. Off, it returns w itself.
func (t *Tracing) Writer(w flashsale.OrderWriter) flashsale.OrderWriter {
	if t == nil {
		return w
	}
	return &writer{next: w, calls: calls{t: t, system: "group_commit", kind: trace.SpanKindInternal}}
}

type writer struct {
	next flashsale.OrderWriter
	calls
}

func (w *writer) Write(ctx context.Context, r *flashsale.Reservation) (flashsale.OrderStatus, error) {
	return call(&w.calls, ctx, "write", func(ctx context.Context) (flashsale.OrderStatus, error) { return w.next.Write(ctx, r) },
		saleKey.String(r.SaleID), orderKey.String(r.OrderID))
}
