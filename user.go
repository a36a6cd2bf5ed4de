package flashsale

import "context"

// User is a guest as authenticated by the HTTP layer from a JWT, with the
// facts about him that the token carried.
type User struct {
	ID       string
	Tier     Tier
	Stays30d int    // nights stayed in the last 30 days
	Channel  string // the partner (an OTA) the guest came through; "" direct
	// Claimed says which of the facts the token carried. Those the token
	// decides; the others come from the user service when one is
	// configured, so a sale whose rules the token decides costs no call.
	Claimed Fact
}

// Fact names one thing an eligibility rule asks about a user. Facts are
// bits, so a set of them is one Fact value.
type Fact uint8

// The facts, each a bit.
const (
	FactTier Fact = 1 << iota
	FactStays30d
	FactChannel
)

// Facts is what the platform's user service knows about a user.
type Facts struct {
	Tier     Tier
	Stays30d int
	Channel  string
}

// With returns u with the facts in need taken from f (and marked known).
func (u User) With(f Facts, need Fact) User {
	if need&FactTier != 0 {
		u.Tier = f.Tier
	}
	if need&FactStays30d != 0 {
		u.Stays30d = f.Stays30d
	}
	if need&FactChannel != 0 {
		u.Channel = f.Channel
	}
	u.Claimed |= need
	return u
}

// UserFacts looks up the facts a token does not carry. The implementation
// (usersvc) asks the platform's user service through a local cache; when the
// service does not answer and nothing is cached, it returns an error
// wrapping ErrUnavailable (a 503), never a guess either way.
type UserFacts interface {
	Facts(ctx context.Context, userID string) (Facts, error)
}
