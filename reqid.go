package flashsale

import "context"

// requestIDKey keys the request id in a context.
type requestIDKey struct{}

// RequestIDContext carries a request id: one allocation, where
// context.WithValue would take a second to box the string. It is exported
// so the HTTP layer can embed it in its per-request context and pay one
// allocation for the id and the deadline together.
type RequestIDContext struct {
	context.Context
	ID string
}

// Value answers the request id's key with c, and asks the parent for any
// other.
func (c *RequestIDContext) Value(k any) any {
	if k == (requestIDKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// WithRequestID returns ctx carrying id, the request id that follows one
// purchase from the HTTP request through the queue to the consumer's log
// line, so an operator can find one order's lines end to end.
func WithRequestID(ctx context.Context, id string) context.Context {
	return &RequestIDContext{Context: ctx, ID: id}
}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	if c, ok := ctx.Value(requestIDKey{}).(*RequestIDContext); ok {
		return c.ID
	}
	return ""
}
