package http

import (
	"crypto/subtle"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/expiring"
	"github.com/golang-jwt/jwt/v5"
)

// Authentication errors. They are sentinels so a flood of bad tokens
// allocates no error values.
var (
	errUnauthenticated = &flashsale.Error{Code: flashsale.EUnauthenticated, Message: "a valid bearer token is required"}
	errForbidden       = &flashsale.Error{Code: flashsale.EForbidden, Message: "this route needs the admin token"}
)

// MaxSubject bounds a user ID (the JWT sub claim).
const MaxSubject = 64

// userClaims is the part of a user JWT the API reads. A small struct rather
// than jwt.MapClaims: the JWT is parsed on every purchase.
//
// The facts eligibility rules ask about (tier, stays_30d, channel) are
// optional: one the token carries decides its rule, one it lacks is asked
// of the user service (see flashsale.User.Claimed), so the presence of
// each is kept.
type userClaims struct {
	Subject   string           `json:"sub"`
	Tier      string           `json:"tier,omitempty"`
	Stays30d  *int             `json:"stays_30d,omitempty"`
	Channel   *string          `json:"channel,omitempty"`
	ExpiresAt *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf,omitempty"`
	IssuedAt  *jwt.NumericDate `json:"iat,omitempty"`
	Issuer    string           `json:"iss,omitempty"`
	Audience  jwt.ClaimStrings `json:"aud,omitempty"`
}

var _ jwt.Claims = (*userClaims)(nil)

func (c *userClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }
func (c *userClaims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore, nil }
func (c *userClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt, nil }
func (c *userClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *userClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *userClaims) GetAudience() (jwt.ClaimStrings, error)       { return c.Audience, nil }

// KeySet is the platform identity provider's public keys (the jwks
// package, over FLASHSALE_JWKS_URL).
type KeySet interface {
	// Key returns the key kid names if alg verifies with it. An error
	// wrapping flashsale.ErrUnavailable means the keys could not be
	// fetched (503); any other, that the token is not to be trusted.
	Key(kid, alg string) (any, error)
	// Gen changes whenever a key is removed or replaced, so a token
	// verified before is verified again.
	Gen() uint64
}

// platformMethods are the algorithms of the provider's tokens, each
// verified only with a key from KeySet of its own type; HS256 is verified
// only with the shared secret. One key source per algorithm is what stops
// algorithm confusion: an HS256 token "signed" with a public key is
// checked against the secret, and a public key is never an HMAC key.
var platformMethods = []string{"RS256", "ES256", "EdDSA"}

// errJWKSUnavailable answers a platform token whose keys cannot be fetched.
var errJWKSUnavailable = &flashsale.Error{Code: flashsale.EUnavailable,
	Message: "the identity provider's keys cannot be fetched to verify this token; retry shortly"}

// ValidSubject reports whether sub is a usable user ID: 1 to 64 characters
// of [A-Za-z0-9._@:-], so it is safe in keys, logs and URLs.
func ValidSubject(sub string) bool {
	if sub == "" || len(sub) > MaxSubject {
		return false
	}
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '@', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(v) <= len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(v[len(prefix):])
	return tok, tok != ""
}

// authenticate returns the user of a request's bearer JWT, or errUnauthenticated.
func (s *Server) authenticate(r *http.Request) (flashsale.User, error) {
	tok, ok := bearer(r)
	if !ok {
		return flashsale.User{}, errUnauthenticated
	}
	return s.verifyUser(tok)
}

// verifyUser checks a user JWT: HS256 with the shared secret or, with a
// KeySet, RS256/ES256/EdDSA with the provider's key of its kid and the
// configured iss and aud; exp required and in the future, a well-formed
// sub. Verified tokens are cached until their exp (see userCache), so a
// guest retrying a purchase pays for one signature check and one JSON parse
// per token rather than per request; a platform token's entry lasts only
// while the key set keeps its generation.
func (s *Server) verifyUser(tok string) (flashsale.User, error) {
	if (len(s.secret) == 0 && s.jwks == nil) || len(tok) > maxTokenLen {
		return flashsale.User{}, errUnauthenticated
	}
	now := s.now()
	var gen uint64
	if s.jwks != nil {
		gen = s.jwks.Gen()
	}
	if u, ok := s.users.get(tok, gen); ok {
		return u, nil
	}
	var c userClaims
	t, err := s.parser.ParseWithClaims(tok, &c, s.key)
	if err != nil {
		if flashsale.Unreachable(err) {
			return flashsale.User{}, errJWKSUnavailable
		}
		return flashsale.User{}, errUnauthenticated
	}
	platform := t.Method != jwt.SigningMethodHS256
	if !s.requiredClaims(&c) {
		return flashsale.User{}, errUnauthenticated
	}
	if !boundedLifetime(&c, now) {
		return flashsale.User{}, errUnauthenticated
	}
	u, ok := c.user()
	if !ok {
		return flashsale.User{}, errUnauthenticated
	}
	s.users.put(tok, cachedUser{user: u, platform: platform, gen: gen}, c.ExpiresAt.Time)
	return u, nil
}

// requiredClaims checks what every user token must say of itself, HS256
// or the provider's: the configured issuer and audience, when set. HS256
// tokens used to skip them, so a token minted for another service that
// shares the secret was taken here too.
func (s *Server) requiredClaims(c *userClaims) bool {
	if s.issuer != "" && c.Issuer != s.issuer {
		return false
	}
	return s.audience == "" || slices.Contains(c.Audience, s.audience)
}

// Token lifetimes. A token that stays good for years (exp in 3000) is a
// password that cannot be changed: one leaked is a guest impersonated for
// ever, so a user token is refused beyond MaxTokenLifetime (the demo
// login's 24 h). One issued in the future (iat past now, beyond a clock
// skew of iatSkew) was not issued by a clock anyone should trust.
const (
	MaxTokenLifetime = 24 * time.Hour
	iatSkew          = time.Minute
)

// boundedLifetime reports whether c's exp is within MaxTokenLifetime of now
// (and of its iat) and its iat, when it has one, not in the future.
func boundedLifetime(c *userClaims, now time.Time) bool {
	exp := c.ExpiresAt.Time // the parser required it
	if exp.Sub(now) > MaxTokenLifetime {
		return false
	}
	if c.IssuedAt != nil {
		iat := c.IssuedAt.Time
		if iat.Sub(now) > iatSkew || exp.Sub(iat) > MaxTokenLifetime+iatSkew {
			return false
		}
	}
	return true
}

// maxStays30d bounds the stays_30d claim: 30 days hold at most a few
// dozen nights even for a guest booking several rooms.
const maxStays30d = 1000

// user is the User the verified claims describe; false when a claim is
// out of its range (a token its issuer should not have signed).
func (c *userClaims) user() (flashsale.User, bool) {
	if !ValidSubject(c.Subject) {
		return flashsale.User{}, false
	}
	u := flashsale.User{ID: c.Subject, Tier: flashsale.Tier(c.Tier)}
	if c.Tier != "" {
		u.Claimed |= flashsale.FactTier
	}
	if c.Stays30d != nil {
		if *c.Stays30d < 0 || *c.Stays30d > maxStays30d {
			return flashsale.User{}, false
		}
		u.Stays30d, u.Claimed = *c.Stays30d, u.Claimed|flashsale.FactStays30d
	}
	if c.Channel != nil {
		if len(*c.Channel) > flashsale.MaxChannelLen {
			return flashsale.User{}, false
		}
		u.Channel, u.Claimed = *c.Channel, u.Claimed|flashsale.FactChannel
	}
	return u, true
}

// maxTokenLen bounds the JWT parsed; a legitimate token is a few hundred bytes.
const maxTokenLen = 4096

// key picks the verification key by the token's algorithm (the parser
// admits only HS256 and, with a KeySet, platformMethods): the shared secret
// for HS256, the provider's key of the token's kid for the others.
func (s *Server) key(t *jwt.Token) (any, error) {
	if t.Method == jwt.SigningMethodHS256 {
		if len(s.secret) == 0 {
			return nil, errUnauthenticated
		}
		return s.secret, nil
	}
	kid, _ := t.Header["kid"].(string)
	if s.jwks == nil || kid == "" {
		return nil, errUnauthenticated
	}
	return s.jwks.Key(kid, t.Method.Alg())
}

// errPaymentOnly answers an operator's token on the payment route once
// the payment service has a token of its own.
var errPaymentOnly = &flashsale.Error{Code: flashsale.EForbidden, Message: "this route needs the payment token"}

// tokenList splits a comma-separated list of tokens; blanks are dropped.
func tokenList(v string) [][]byte {
	var list [][]byte
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			list = append(list, []byte(t))
		}
	}
	return list
}

// hasToken reports whether the request's bearer token is one of list. It
// compares against every entry, each in constant time, so response timing
// reveals neither a token nor which one matched.
func hasToken(r *http.Request, list [][]byte) bool {
	tok, ok := bearer(r)
	if !ok {
		return false
	}
	match := 0
	for _, t := range list {
		match |= subtle.ConstantTimeCompare([]byte(tok), t)
	}
	return match == 1
}

// isAdmin reports whether the request carries an operator's token.
func (s *Server) isAdmin(r *http.Request) bool { return hasToken(r, s.admin) }

// isPayment reports whether the request carries the payment service's
// token (an operator's while the payment service has none of its own).
func (s *Server) isPayment(r *http.Request) bool {
	if len(s.payment) == 0 {
		return s.isAdmin(r)
	}
	return hasToken(r, s.payment)
}

// requirePayment lets only the payment service's token through: an
// operator's token is 403 once there is a payment token, a user JWT 403,
// anything else 401.
func (s *Server) requirePayment(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.isPayment(r):
			h(w, r)
		case s.isAdmin(r):
			s.writeError(w, r, errPaymentOnly)
		default:
			if _, err := s.authenticate(r); err == nil {
				s.writeError(w, r, errForbidden)
				return
			}
			s.writeError(w, r, errUnauthenticated)
		}
	}
}

// requireAdmin lets only the admin token through. A valid user JWT is
// answered 403 (authenticated, not allowed); anything else 401.
func (s *Server) requireAdmin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.isAdmin(r) {
			h(w, r)
			return
		}
		if hasToken(r, s.payment) {
			s.writeError(w, r, errForbidden) // the payment service's token
			return
		}
		if _, err := s.authenticate(r); err == nil {
			s.writeError(w, r, errForbidden)
			return
		}
		s.writeError(w, r, errUnauthenticated)
	}
}

// userCacheSize bounds the verified-token cache. Only tokens that passed
// verification enter it, so its size is bounded by what holders of the
// secret issue; when full it is emptied, not grown.
const userCacheSize = 1 << 16

const (
	// userCacheFor is the longest a verified token is kept before it is
	// verified again, however long it lives: a guest keeps the one token
	// all day, and an entry per guest kept for a day held a finished
	// sale's guests in memory (issue 26). Verifying again costs
	// microseconds once in a while.
	userCacheFor = 5 * time.Minute
	// userCacheIdle is how often the cache sweeps while it holds anything.
	userCacheIdle = time.Minute
)

// userCache remembers verified user JWTs until their expiry or for
// userCacheFor, whichever is sooner. The key is the exact token string, so
// a hit is a token already verified byte for byte.
type userCache struct {
	now func() time.Time
	m   *expiring.Map[string, cachedUser]
}

type cachedUser struct {
	user flashsale.User
	// platform marks a token verified with a provider key, valid while
	// the key set's generation is gen.
	platform bool
	gen      uint64
}

func newUserCache(max int, now func() time.Time) *userCache {
	return &userCache{now: now, m: expiring.New[string, cachedUser](expiring.Config{Idle: userCacheIdle, Max: max, Now: now})}
}

// get returns the user of a cached token that has not expired and, for a
// platform token, was verified under the key set's generation gen.
func (c *userCache) get(tok string, gen uint64) (flashsale.User, bool) {
	e, ok := c.m.Get(tok)
	if !ok || (e.platform && e.gen != gen) {
		return flashsale.User{}, false
	}
	return e.user, true
}

// put caches a token verified to expire at exp.
func (c *userCache) put(tok string, e cachedUser, exp time.Time) {
	if limit := c.now().Add(userCacheFor); limit.Before(exp) {
		exp = limit
	}
	c.m.Set(tok, e, exp)
}

// handleDemoLogin hands out a 24-hour user JWT for any well-formed user ID.
// It is registered only in demo mode.
func (s *Server) handleDemoLogin(w http.ResponseWriter, r *http.Request) {
	body, err := decodeLogin(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tok, exp, err := s.signUser(body.UserID, flashsale.Tier(body.Tier), 24*time.Hour)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loginJSON{Token: tok, ExpiresAt: exp})
}

// loginJSON answers a demo login.
type loginJSON struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// signUser issues a user JWT valid for ttl.
func (s *Server) signUser(userID string, tier flashsale.Tier, ttl time.Duration) (string, time.Time, error) {
	if len(s.secret) == 0 {
		return "", time.Time{}, flashsale.Errorf(flashsale.EUnavailable, "no JWT secret is configured")
	}
	now := s.now()
	exp := now.Add(ttl).Truncate(time.Second)
	c := &userClaims{
		Subject:   userID,
		Tier:      string(tier),
		ExpiresAt: jwt.NewNumericDate(exp),
		IssuedAt:  jwt.NewNumericDate(now),
		Issuer:    s.issuer,
	}
	if s.audience != "" {
		c.Audience = jwt.ClaimStrings{s.audience}
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// loginBody is the demo login request.
type loginBody struct {
	UserID string `json:"user_id"`
	Tier   string `json:"tier"`
}

// decodeLogin decodes a demo login: a user ID that is a valid sub claim and
// an optional known tier.
func decodeLogin(r io.Reader) (loginBody, error) {
	var b loginBody
	if err := decodeBody(r, &b, false); err != nil {
		return loginBody{}, err
	}
	if !ValidSubject(b.UserID) {
		return loginBody{}, flashsale.Errorf(flashsale.EInvalid,
			"user_id must be 1 to %d characters of letters, digits and . _ @ : -", MaxSubject)
	}
	if b.Tier != "" && flashsale.Tier(b.Tier).Rank() == 0 {
		return loginBody{}, flashsale.Errorf(flashsale.EInvalid, "tier must be one of basic, silver, gold, platinum")
	}
	return b, nil
}
