package flashsale

import "context"

// requestIDKey keys the request id in a context.
type requestIDKey struct{}

// requestIDCtx carries a request id: one allocation, where
// context.WithValue would take a second to box the string, and every
// request pays it.
type requestIDCtx struct {
	context.Context
	id string
}

func (c *requestIDCtx) Value(k any) any {
	if k == (requestIDKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// WithRequestID returns ctx carrying id, the request id that follows one
// purchase from the HTTP request through the queue to the consumer's log
// line, so an operator can find one order's lines end to end.
func WithRequestID(ctx context.Context, id string) context.Context {
	return &requestIDCtx{Context: ctx, id: id}
}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	if c, ok := ctx.Value(requestIDKey{}).(*requestIDCtx); ok {
		return c.id
	}
	return ""
}
