package redis

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
)

// Spender remembers spent purchase tokens in Redis, shared by every
// instance, with SET NX PX: the first SET wins and the key lives exactly as
// long as the token could still be presented.
type Spender struct{ e *Engine }

var _ flashsale.TokenSpender = (*Spender)(nil)

// Spender returns the engine's token spender; it shares the connections.
func (e *Engine) Spender() *Spender { return &Spender{e: e} }

// Spend marks the token used until expires and reports whether this call
// was the first. A token that has already expired is kept for a
// millisecond, which SET needs to be a positive time.
func (s *Spender) Spend(ctx context.Context, id string, expires time.Time) (bool, error) {
	ttl := max(time.Until(expires), time.Millisecond)
	ok, err := s.e.client.SetNX(ctx, s.e.prefix+"token:"+id, 1, ttl.Round(time.Millisecond)).Result()
	if err != nil {
		return false, unavailable("spend token", err)
	}
	return ok, nil
}
